/** PEP 503 project names: "PyYAML", "ruamel_yaml" and "Ruamel.Yaml" name one project each, compared normalised. */
export function normalizeName(name: string): string {
  return name
    .trim()
    .toLowerCase()
    .replace(/[-_.]+/g, '-');
}

/** The project a requirement's text names (`Six>=1.10; python_version<"4"` -> `six`), normalised. */
export function requirementName(requirement: string): string {
  return normalizeName(requirement.split(/[\s[<>=!~;@(]/)[0]);
}
