/**
 * A project's `addopts`, option by option, with what a traced run does with each: a plugin's
 * option is stripped or installed as the one table of pytest's options says
 * (runtime/pytest_options.ts); an option no plugin there owns is kept: a conftest.py may define it.
 */
import { pytestOption, strippedModule, type Traced, takesNext } from '../../runtime/pytest_options.js';

/** One option of addopts with its value words, and what to do with it. */
export interface AddoptsItem {
  words: string[];
  action: Traced | 'keep';
  plugin?: string;
}

export function readAddopts(words: string[]): AddoptsItem[] {
  const items: AddoptsItem[] = [];
  for (let i = 0; i < words.length; i++) {
    const word = words[i];
    const name = word.startsWith('--') && word.includes('=') ? word.slice(0, word.indexOf('=')) : word;
    if (name === '-p' && i + 1 < words.length) {
      const plugin = strippedModule(words[i + 1]);
      items.push({ words: [word, words[i + 1]], ...(plugin ? { action: 'strip', plugin } : { action: 'keep' }) });
      i++;
      continue;
    }
    // "-n4" and "-nauto": xdist's short option with its value attached.
    const short = /^-n(\d+|auto|logical)$/.test(word);
    const opt = pytestOption(short ? '-n' : name);
    if (!opt?.plugin) {
      items.push({ words: [word], action: 'keep' });
      continue;
    }
    const next = words[i + 1];
    items.push({ words: !short && takesNext(word, next) ? [word, words[++i]] : [word], action: opt.traced ?? 'keep', plugin: opt.plugin });
  }
  return items;
}
