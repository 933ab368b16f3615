/**
 * A Debian version read as the upstream PEP 440 version it packages, so a project's bounds can be
 * checked against what a suite ships: "1:2.8.2-3+b1" is 2.8.2, "1.0~rc1-2" is 1.0rc1, "3.2+dfsg-1"
 * is 3.2, "1.5+really1.4-1" is 1.4 (Debian's way of going back to an older upstream).
 */
import { parseVersion, type Version } from '../requirements/pep440.js';

const TILDE_PRE = /~(alpha|a|beta|b|rc|c|preview|pre)[-_.]?(\d*)/i;

export function debianUpstreamVersion(debian: string): Version | undefined {
  let v = debian.trim().replace(/^\d+:/, '');
  const dash = v.lastIndexOf('-');
  if (dash > 0) v = v.slice(0, dash);
  const really = /\+really([^+~]+.*)$/.exec(v);
  if (really) v = really[1];
  // "+dfsg", "+ds1", "+repack", "+git20230101.abc", "+b1": downstream repacks and snapshots after the release.
  v = v.replace(/\+.*$/, '');
  // "~" sorts before: a pre-release ("1.0~rc1") or a snapshot before the release ("1.0~git2023...": a dev release).
  const tilde = v.indexOf('~');
  if (tilde >= 0) {
    const pre = TILDE_PRE.exec(v.slice(tilde));
    const dev = /^~dev[-_.]?(\d*)/i.exec(v.slice(tilde));
    const base = v.slice(0, tilde);
    v = pre?.index === 0 ? `${base}${pre[1]}${pre[2] || '0'}` : dev ? `${base}.dev${dev[1] || '0'}` : `${base}.dev0`;
  }
  try {
    return parseVersion(v);
  } catch {
    const lead = /^\d+(?:\.\d+)*/.exec(v);
    return lead ? parseVersion(lead[0]) : undefined;
  }
}
