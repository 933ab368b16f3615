/**
 * Downloads through the proxy this host's pip is configured with (`proxy`, PIP_PROXY): Node's
 * HTTP client takes none of its own, so an HTTPS file is fetched through a CONNECT tunnel, as pip
 * and uv do, with the proxy's credentials when its URL carries them, and an HTTP one by asking
 * the proxy for the whole URL.
 */
import { request as httpRequest, type RequestOptions } from 'node:http';
import { isIP, type Socket } from 'node:net';
import { type TLSSocket, connect as tlsConnect } from 'node:tls';

const authorization = (proxy: URL): Record<string, string> =>
  proxy.username
    ? { 'proxy-authorization': `Basic ${Buffer.from(`${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`).toString('base64')}` }
    : {};

/** A socket to `target`'s host and port through `proxy` (CONNECT), or the reason the proxy gave. */
function tunnel(proxy: URL, target: URL, signal: AbortSignal, timeoutMs: number): Promise<Socket> {
  const port = target.port || (target.protocol === 'https:' ? '443' : '80');
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: proxy.hostname,
      port: proxy.port || 80,
      method: 'CONNECT',
      path: `${target.hostname}:${port}`,
      headers: { host: `${target.hostname}:${port}`, ...authorization(proxy) },
      signal,
      timeout: timeoutMs,
    });
    req.on('connect', (res, socket) => {
      if (res.statusCode === 200) resolve(socket);
      else {
        socket.destroy();
        reject(new Error(`the proxy ${proxy.host} answered ${res.statusCode} to CONNECT ${target.hostname}:${port}`));
      }
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from the proxy ${proxy.host} for ${timeoutMs / 1000} s`)));
    req.on('error', reject);
    req.end();
  });
}

/**
 * Request options that send a GET of `url` through `proxy`: for HTTPS, a TLS connection (trusting
 * `ca`) over a tunnel; for HTTP, the proxy itself asked for the URL.
 */
export async function throughProxy(proxyUrl: string, url: string, ca: Buffer | undefined, signal: AbortSignal, timeoutMs: number): Promise<RequestOptions> {
  const proxy = new URL(proxyUrl);
  const target = new URL(url);
  if (target.protocol === 'http:') {
    return { host: proxy.hostname, port: proxy.port || 80, path: url, headers: { host: target.host, ...authorization(proxy) } };
  }
  const socket = await tunnel(proxy, target, signal, timeoutMs);
  // The handshake is awaited here, so a certificate the host does not trust is this call's error.
  const secure = await new Promise<TLSSocket>((resolve, reject) => {
    const tls = tlsConnect({ socket, ca, host: target.hostname, ...(isIP(target.hostname) ? {} : { servername: target.hostname }) }, () => resolve(tls));
    tls.once('error', reject);
  });
  // No agent: a request with its own createConnection and no agent uses that connection (agent: false would not).
  return { createConnection: () => secure };
}
