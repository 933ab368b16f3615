/** PEP 503 project names: "PyYAML", "ruamel_yaml" and "Ruamel.Yaml" name one project each, compared normalised. */
export function normalizeName(name: string): string {
  return name
    .trim()
    .toLowerCase()
    .replace(/[-_.]+/g, '-');
}
