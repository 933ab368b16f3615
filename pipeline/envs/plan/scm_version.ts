/**
 * The version a VCS-versioned project (setuptools-scm, hatch-vcs, flit's or setuptools' dynamic
 * versions) would give itself at a commit, as setuptools-scm's default scheme spells it: the
 * nearest tag's version on a tagged commit, `<next>.dev<distance>+g<sha>` past one, and
 * `0.1.dev<count>+g<sha>` with no tag. The image has the checkout without its history, so the
 * build hands this to the backend (SETUPTOOLS_SCM_PRETEND_VERSION) and to the version files it
 * would have written.
 */
import { git } from '../../../core/git.js';

/** A tag's version: `v1.2.3`, `release-1.2.3`, `1.2.3` -> `1.2.3`; null when it holds none. */
export function tagVersion(tag: string): string | null {
  const m = /(\d+(?:\.\d+)*(?:(?:a|b|rc|\.post|\.dev)\d+)*)$/.exec(tag.replace(/^.*?[-_/]?v?(?=\d)/, ''));
  return m ? m[1] : null;
}

/** setuptools-scm's guess-next-dev: the last release number one up. */
function nextRelease(version: string): string {
  const release = /^\d+(?:\.\d+)*/.exec(version)![0].split('.');
  const last = release.length - 1;
  release[last] = String(Number(release[last]) + 1);
  return release.join('.');
}

/** `describe` is `git describe --tags --long` output (`TAG-N-gSHA`), or null when no tag is reachable. */
export function scmVersion(describe: string | null, sha: string, commits: number): string {
  const short = sha.slice(0, 7);
  const m = describe ? /^(.*)-(\d+)-g([0-9a-f]+)$/.exec(describe.trim()) : null;
  const version = m ? tagVersion(m[1]) : null;
  if (!m || !version) return `0.1.dev${commits}+g${short}`;
  const distance = Number(m[2]);
  return distance === 0 ? version : `${nextRelease(version)}.dev${distance}+g${short}`;
}

/** The version of `commit` in the repository at `gitDir` (a bare mirror). */
export async function versionAt(gitDir: string, commit: string): Promise<string> {
  const describe = await git(['--git-dir', gitDir, 'describe', '--tags', '--long', '--match', '*[0-9]*', commit]).catch(() => null);
  const count = Number((await git(['--git-dir', gitDir, 'rev-list', '--count', commit]).catch(() => '0')).trim());
  return scmVersion(describe, commit, count);
}
