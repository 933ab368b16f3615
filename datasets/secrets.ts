/**
 * Finds secrets and personal data in text and replaces each with a typed placeholder
 * (`<AWS_ACCESS_KEY>`, `<PRIVATE_KEY>`, `<EMAIL>`, ...). Two rule sources:
 * - gitleaks' published rules, ported as data (`secret_rules.json`, its source and licence inside;
 *   regenerate with scripts/port_gitleaks.py), matched the way gitleaks matches them: a rule runs
 *   only when one of its keywords occurs, its secret group must reach the rule's entropy and pass
 *   the rule's and the global allow-lists and stop words;
 * - ours, for what a rule set keyed on vendors misses: private-key blocks (also truncated ones and
 *   ones whose newlines are escaped, as in a repr), AWS secret keys by name, e-mail addresses,
 *   public IPv4 addresses and high-entropy tokens, tuned against real code (see README).
 * A placeholder has no quote or backslash and a match never starts inside an escape, so a
 * redacted JSON string or Python repr stays valid.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../core/package.js';

interface PortedRegex {
  source: string;
  flags: string;
}

interface PortedRule {
  id: string;
  placeholder: string;
  regex: PortedRegex;
  secret_group: number | null;
  entropy: number | null;
  keywords: string[];
  allow_secret: PortedRegex[];
  allow_match: PortedRegex[];
  stopwords: string[];
}

interface PortedRuleSet {
  source: string;
  license: string;
  allow_secret: PortedRegex[];
  stopwords: string[];
  rules: PortedRule[];
}

interface Rule {
  id: string;
  placeholder: string;
  re: RegExp;
  secretGroup: number | null;
  entropy: number | null;
  allowSecret: RegExp[];
  allowMatch: RegExp[];
  stopwords: string[];
}

/** One secret found: the span replaced and the placeholder kind. */
export interface Finding {
  start: number;
  end: number;
  kind: string;
}

/**
 * Which kind names a span several rules found: exact values first, then vendor rules, then the
 * catch-alls (gitleaks' generic-api-key, addresses, entropy).
 */
const GENERIC_KINDS = ['GENERIC_API_KEY', 'EMAIL', 'IP_ADDRESS', 'HIGH_ENTROPY_TOKEN'];
const rank = (f: Finding) => (f.kind === 'ENV_SECRET' ? -1 : GENERIC_KINDS.indexOf(f.kind));

const compile = (r: PortedRegex, extra = '') => new RegExp(r.source, r.flags + extra);

/** Shannon entropy in bits per character, as gitleaks and detect-secrets compute it. */
export function shannonEntropy(s: string): number {
  const counts = new Map<string, number>();
  for (const ch of s) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  let h = 0;
  for (const n of counts.values()) {
    const p = n / s.length;
    h -= p * Math.log2(p);
  }
  return h;
}

// A match may not begin right after a backslash: it would eat the letter of an escape (`\n`, `\u00e9`).
const NOT_IN_ESCAPE = '(?<!\\\\)';
/** A match starts where `before` (a character class) is not, or right after an escaped newline or tab (reprs and JSON text). */
const startAfter = (before: string) => `${NOT_IN_ESCAPE}(?:(?<!${before})|(?<=\\\\[nrt]))`;

/** `-----BEGIN ... PRIVATE KEY-----`, its body (real or escaped newlines) and the END line when there is one. */
const PRIVATE_KEY =
  /-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=\s:,.-]|\\+[nr])*?(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|(?![A-Za-z0-9+/=\s:,.-]|\\+[nr]))/g;

/** A 40-character AWS secret access key after a name that says so (gitleaks keys AWS on the id only). */
const AWS_SECRET = /aws.{0,20}?(?:secret|key|pwd|pw|password|pass|token).{0,20}?[=:,(]\s*['"`]?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])/gi;

const EMAIL = new RegExp(`${startAfter('[A-Za-z0-9._%+-]')}[A-Za-z0-9][A-Za-z0-9._%+-]*@(?:[A-Za-z0-9-]+\\.)+[A-Za-z]{2,24}(?![A-Za-z0-9-])`, 'g');
/** Addresses that name nobody: reserved documentation domains, and git's ssh user. */
const EMAIL_ALLOWED = /(?:@(?:[a-z0-9-]+\.)*(?:example\.(?:com|org|net)|example|test|invalid|localhost)$|^git@)/i;

const OCTET = '(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
const IPV4 = new RegExp(`${startAfter('[\\w.]')}${OCTET}(?:\\.${OCTET}){3}(?!\\.?\\d)`, 'g');
/** Loopback, private, link-local, shared, documentation, multicast and reserved ranges identify no one. */
function publicIpv4(ip: string): boolean {
  const [a, b, c, d] = ip.split('.').map(Number);
  // Four one-digit parts are a section or version number (`RFC 3986 6.2.2.3`) far more often than a host.
  if (a < 10 && b < 10 && c < 10 && d < 10) return false;
  if (a === 0 || a === 10 || a === 127 || a >= 224) return false;
  if ((a === 169 && b === 254) || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168)) return false;
  if (a === 100 && b >= 64 && b <= 127) return false;
  if ((a === 192 && b === 0 && c === 2) || (a === 198 && b === 51 && c === 100) || (a === 203 && b === 0 && c === 113)) return false;
  if (a === 198 && (b === 18 || b === 19)) return false;
  return true;
}

/** Base64 / URL-safe runs; hex-only runs (hashes, ids) and UUIDs never count as high-entropy. */
const TOKEN = new RegExp(`${startAfter('[A-Za-z0-9+/=_-]')}[A-Za-z0-9+/_-]{20,}={0,2}(?![A-Za-z0-9+/=_-])`, 'g');
const HEX_OR_UUID = /^[0-9a-fA-F-]+$/;

/** Upper, lower and digit switch at 62% of characters in random base62, at most about 40% in camel-case identifiers (`relativeLinkBaseForRFC3986`). */
const MIN_CLASS_SWITCHES = 0.45;

const charClass = (c: number) => (c >= 65 && c <= 90 ? 1 : c >= 97 && c <= 122 ? 2 : c >= 48 && c <= 57 ? 3 : 0);

/**
 * Random-looking tokens: at least 20 characters with upper and lower case letters and digits
 * that switch often, whose entropy is close to the most a string of that length can have. A
 * token with slashes is judged segment by segment, so paths (`JSON_checker/test/fail19`) are not
 * taken for base64. The thresholds were set on the corpus traces (README: false positives).
 */
function highEntropy(token: string): boolean {
  if (token.includes('/')) return token.split('/').some((seg) => seg.length >= 20 && highEntropy(seg));
  if (HEX_OR_UUID.test(token)) return false;
  const body = token.replace(/=+$/, '');
  const seen = [0, 0, 0, 0];
  let switches = 0;
  let prev = -1;
  for (let i = 0; i < body.length; i++) {
    const k = charClass(body.charCodeAt(i));
    seen[k]++;
    if (prev >= 0 && k !== prev) switches++;
    prev = k;
  }
  if (seen[1] < 2 || seen[2] < 2 || seen[3] < 2 || switches < MIN_CLASS_SWITCHES * body.length) return false;
  return shannonEntropy(body) >= Math.min(4.5, Math.log2(body.length) - 0.6);
}

/** Kinds of our own rules beside the ported ones' placeholders. */
const OWN_KINDS = ['ENV_SECRET', 'PRIVATE_KEY', 'AWS_SECRET_KEY', 'EMAIL', 'IP_ADDRESS', 'HIGH_ENTROPY_TOKEN'];

function loadRules(): { set: PortedRuleSet; rules: Rule[]; globalAllow: RegExp[]; globalStop: string[] } {
  const set = JSON.parse(readFileSync(join(packageRoot, 'datasets', 'secret_rules.json'), 'utf8')) as PortedRuleSet;
  const rules = set.rules.map(
    (r): Rule => ({
      id: r.id,
      placeholder: r.placeholder,
      re: compile(r.regex, 'gd'),
      secretGroup: r.secret_group,
      entropy: r.entropy,
      allowSecret: r.allow_secret.map((a) => compile(a)),
      allowMatch: r.allow_match.map((a) => compile(a)),
      stopwords: r.stopwords,
    }),
  );
  return { set, rules, globalAllow: set.allow_secret.map((a) => compile(a)), globalStop: set.stopwords };
}

/** Strings up to this long are memoized, up to this many characters in all (then the memo starts over). */
const MEMO_MAX_CHARS = 65_536;
const MEMO_BUDGET_CHARS = 32_000_000;

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export interface ScannerOptions {
  /** Exact strings to replace wherever they occur (e.g. secret values a manifest's env.vars hands to tests), with their kind. */
  literals?: Map<string, string>;
}

export class SecretScanner {
  readonly source: string;
  readonly license: string;
  readonly ruleCount: number;
  private readonly rules: Rule[];
  private readonly globalAllow: RegExp[];
  private readonly globalStop: string[];
  /** One pass finds which keywords occur; only their rules run. */
  private readonly keywordRe: RegExp;
  private readonly byKeyword = new Map<string, number[]>();
  private readonly literals: { re: RegExp; kinds: Map<string, string> } | null;
  /** Placeholders a text already holds (parts are redacted as they are written): counted again by kind, so counts survive a second pass. */
  private readonly placeholderRe: RegExp;

  constructor(opts: ScannerOptions = {}) {
    const { set, rules, globalAllow, globalStop } = loadRules();
    this.source = set.source;
    this.license = set.license;
    this.rules = rules;
    this.ruleCount = rules.length;
    const kinds = new Set([...rules.map((r) => r.placeholder), ...OWN_KINDS]);
    this.placeholderRe = new RegExp(`<(${[...kinds].map(escapeRe).join('|')})>`, 'g');
    this.globalAllow = globalAllow;
    this.globalStop = globalStop;
    set.rules.forEach((r, i) => {
      for (const k of r.keywords) this.byKeyword.set(k, [...(this.byKeyword.get(k) ?? []), i]);
    });
    const keys = [...this.byKeyword.keys()].sort((a, b) => b.length - a.length);
    this.keywordRe = new RegExp(keys.map(escapeRe).join('|'), 'gi');
    const lits = [...(opts.literals ?? new Map<string, string>())].filter(([v]) => v.length >= 6);
    this.literals = lits.length
      ? {
          re: new RegExp(
            lits
              .map(([v]) => escapeRe(v))
              .sort((a, b) => b.length - a.length)
              .join('|'),
            'g',
          ),
          kinds: new Map(lits),
        }
      : null;
  }

  private allowedSecret(rule: Rule, secret: string, match: string): boolean {
    if (rule.entropy !== null && shannonEntropy(secret) < rule.entropy) return true;
    if (rule.allowSecret.some((re) => re.test(secret)) || rule.allowMatch.some((re) => re.test(match))) return true;
    if (this.globalAllow.some((re) => re.test(secret))) return true;
    const lower = secret.toLowerCase();
    return rule.stopwords.some((w) => lower.includes(w)) || this.globalStop.some((w) => lower.includes(w));
  }

  private portedFindings(text: string, out: Finding[]): void {
    const candidates = new Set<number>();
    this.keywordRe.lastIndex = 0;
    for (let m = this.keywordRe.exec(text); m; m = this.keywordRe.exec(text)) {
      for (const i of this.byKeyword.get(m[0].toLowerCase()) ?? []) candidates.add(i);
    }
    for (const i of candidates) {
      const rule = this.rules[i];
      rule.re.lastIndex = 0;
      for (let m = rule.re.exec(text); m; m = rule.re.exec(text)) {
        if (m[0] === '') {
          rule.re.lastIndex++;
          continue;
        }
        // gitleaks' secret: the rule's secret group, else the first group that matched, else the match.
        const g = rule.secretGroup ?? m.findIndex((v, j) => j > 0 && v !== undefined);
        const group = g > 0 && m[g] !== undefined ? g : 0;
        const [start, end] = m.indices?.[group] ?? [m.index, m.index + m[0].length];
        if (!this.allowedSecret(rule, m[group], m[0])) out.push({ start, end, kind: rule.placeholder });
      }
    }
  }

  /** Every secret in `text`; overlapping findings are merged into one span named by the most specific rule. */
  findings(text: string): Finding[] {
    const out: Finding[] = [];
    const each = (re: RegExp, kind: string | ((m: RegExpExecArray) => string | null), group = 0) => {
      re.lastIndex = 0;
      for (let m = re.exec(text); m; m = re.exec(text)) {
        const k = typeof kind === 'string' ? kind : kind(m);
        if (!k) continue;
        const start = group ? m.index + m[0].lastIndexOf(m[group]) : m.index;
        out.push({ start, end: start + m[group].length, kind: k });
      }
    };
    if (this.literals) {
      const lit = this.literals;
      each(lit.re, (m) => lit.kinds.get(m[0]) ?? null);
    }
    if (text.includes('PRIVATE KEY')) each(PRIVATE_KEY, 'PRIVATE_KEY');
    this.portedFindings(text, out);
    if (/aws/i.test(text)) each(AWS_SECRET, 'AWS_SECRET_KEY', 1);
    if (text.includes('@')) each(EMAIL, (m) => (EMAIL_ALLOWED.test(m[0]) ? null : 'EMAIL'));
    if (text.length >= 7 && text.includes('.')) each(IPV4, (m) => (publicIpv4(m[0]) ? 'IP_ADDRESS' : null));
    if (text.length >= 20) each(TOKEN, (m) => (highEntropy(m[0]) ? 'HIGH_ENTROPY_TOKEN' : null));
    if (out.length < 2) return out;
    out.sort((a, b) => a.start - b.start || b.end - a.end);
    const merged: Finding[] = [out[0]];
    for (const f of out.slice(1)) {
      const last = merged[merged.length - 1];
      if (f.start >= last.end) merged.push(f);
      else {
        last.end = Math.max(last.end, f.end);
        if (rank(f) < rank(last)) last.kind = f.kind;
      }
    }
    return merged;
  }

  /**
   * Traces repeat the same strings (a source line in every episode that runs it, a local's repr
   * in every frame), so results are memoized: a repeated string costs one lookup.
   */
  private readonly memo = new Map<string, { text: string; kinds: string[] }>();
  private memoChars = 0;

  /** `text` with every finding replaced by `<KIND>`; `tally` counts them by kind. The same string comes back when nothing was found. */
  redact(text: string, tally: Map<string, number>): string {
    if (text.length < 6) return text;
    let hit = text.length <= MEMO_MAX_CHARS ? this.memo.get(text) : undefined;
    if (!hit) {
      hit = this.replace(text);
      if (text.length <= MEMO_MAX_CHARS) {
        if (this.memoChars > MEMO_BUDGET_CHARS) {
          this.memo.clear();
          this.memoChars = 0;
        }
        this.memo.set(text, hit);
        this.memoChars += text.length;
      }
    }
    for (const k of hit.kinds) tally.set(k, (tally.get(k) ?? 0) + 1);
    return hit.text;
  }

  private replace(text: string): { text: string; kinds: string[] } {
    const found = this.findings(text);
    const prior = text.includes('<') ? [...text.matchAll(this.placeholderRe)].map((m) => m[1]) : [];
    if (!found.length) return { text, kinds: prior };
    let out = '';
    let at = 0;
    for (const f of found) {
      out += `${text.slice(at, f.start)}<${f.kind}>`;
      at = f.end;
    }
    return { text: out + text.slice(at), kinds: [...prior, ...found.map((f) => f.kind)] };
  }
}
