/**
 * PEP 508 dependency specifications: `name[extra1,extra2] (>=1.0,<2) ; python_version < "3.11"`,
 * `name @ https://host/name.whl ; marker`. What pip would accept in a requirements line once its
 * options are taken off, and what `[project] dependencies` and `Requires-Dist` hold.
 */
import { evaluateMarker, type Marker, type MarkerEnv, parseMarker } from './markers.js';
import { normalizeName } from './names.js';
import { parseSpecifiers, type Specifier } from './pep440.js';

export interface Requirement {
  /** As written. */
  name: string;
  /** PEP 503 normalised: what lookups and comparisons use. */
  key: string;
  /** Normalised. */
  extras: string[];
  specifiers: Specifier[];
  url?: string;
  marker?: Marker;
  /** The marker as written, for people. */
  markerText?: string;
}

export class RequirementError extends Error {}

const NAME = /^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*/;

export function parseRequirement(text: string): Requirement {
  const m = NAME.exec(text);
  if (!m) throw new RequirementError(`not a requirement: ${JSON.stringify(text)}`);
  let rest = text.slice(m[0].length);
  const req: Requirement = { name: m[1], key: normalizeName(m[1]), extras: [], specifiers: [] };
  const extras = /^\[([^\]]*)\]\s*/.exec(rest);
  if (extras) {
    req.extras = extras[1]
      .split(',')
      .map((e) => e.trim())
      .filter(Boolean)
      .map(normalizeName);
    rest = rest.slice(extras[0].length);
  }
  if (rest.startsWith('@')) {
    // The URL runs to whitespace: a ";" inside it is part of it, the marker needs a space before it.
    const url = /^@\s*(\S+)\s*/.exec(rest);
    if (!url) throw new RequirementError(`"@" without a URL in ${JSON.stringify(text)}`);
    req.url = url[1];
    rest = rest.slice(url[0].length);
  } else {
    const spec = /^(\(([^)]*)\)|[^;]*)/.exec(rest)!;
    try {
      req.specifiers = parseSpecifiers(spec[2] ?? spec[1]);
    } catch (e) {
      throw new RequirementError(`${(e as Error).message} in ${JSON.stringify(text)}`);
    }
    rest = rest.slice(spec[0].length).trimStart();
  }
  if (rest.startsWith(';')) {
    req.markerText = rest.slice(1).trim();
    try {
      req.marker = parseMarker(req.markerText);
    } catch (e) {
      throw new RequirementError(`${(e as Error).message} in ${JSON.stringify(text)}`);
    }
  } else if (rest.trim()) throw new RequirementError(`unexpected ${JSON.stringify(rest.trim())} in ${JSON.stringify(text)}`);
  return req;
}

/** Whether the requirement applies in `env` (no marker: always). */
export function markerHolds(req: Requirement, env: MarkerEnv): boolean {
  return !req.marker || evaluateMarker(req.marker, env);
}

/** The requirement restricted further by `marker` (and-ed with its own). */
export function withMarker(req: Requirement, marker: string): Requirement {
  const markerText = req.markerText ? `(${req.markerText}) and (${marker})` : marker;
  return { ...req, markerText, marker: parseMarker(markerText) };
}
