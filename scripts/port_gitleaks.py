#!/usr/bin/env python3
"""Ports gitleaks' published rule set (config/gitleaks.toml, MIT) to datasets/secret_rules.json.

Usage: scripts/port_gitleaks.py GITLEAKS_TOML COMMIT > datasets/secret_rules.json && npm run format
Go's RE2 syntax becomes JavaScript's: inline flags ((?i), (?i:...), (?-i:...)) have no JavaScript
form before Node 23, so a rule with any case-insensitive part is matched case-insensitively as a
whole (looser, never stricter); (?P<name> becomes (?<name>. Rules scoped to a file path (not text)
are left out: a dataset row has no path.
"""
import json
import re
import sys
import tomllib

# Typed placeholders the issue names; every other rule's placeholder is its id in capitals.
PLACEHOLDERS = {'aws-access-token': 'AWS_ACCESS_KEY', 'private-key': 'PRIVATE_KEY'}


def js_regex(go: str) -> dict:
    flags = ''
    if '(?i)' in go or '(?i:' in go:
        flags += 'i'
    src = go.replace('(?i)', '').replace('(?i:', '(?:').replace('(?-i:', '(?:').replace('(?P<', '(?<')
    src = src.replace(r'\z', '$').replace(r'\A', '^')
    if '(?s)' in src:
        src = src.replace('(?s)', '')
        flags += 's'
    return {'source': src, 'flags': flags}


def main() -> None:
    path, commit = sys.argv[1], sys.argv[2]
    with open(path, 'rb') as f:
        config = tomllib.load(f)
    rules = []
    skipped = []
    for r in config['rules']:
        if 'regex' not in r or 'path' in r:
            skipped.append(r['id'])
            continue
        allow = [js_regex(x) for a in r.get('allowlists', []) if a.get('regexTarget', 'secret') == 'secret' for x in a.get('regexes', [])]
        match_allow = [js_regex(x) for a in r.get('allowlists', []) if a.get('regexTarget') == 'match' for x in a.get('regexes', [])]
        stopwords = sorted({w for a in r.get('allowlists', []) for w in a.get('stopwords', [])})
        rules.append({
            'id': r['id'],
            'placeholder': PLACEHOLDERS.get(r['id'], re.sub(r'[^A-Z0-9]+', '_', r['id'].upper())),
            'regex': js_regex(r['regex']),
            'secret_group': r.get('secretGroup'),
            'entropy': r.get('entropy'),
            'keywords': [k.lower() for k in r.get('keywords', [])],
            'allow_secret': allow,
            'allow_match': match_allow,
            'stopwords': stopwords,
        })
    glob = config.get('allowlists') or [config.get('allowlist', {})]
    out = {
        'source': f'https://github.com/gitleaks/gitleaks/blob/{commit}/config/gitleaks.toml',
        'license': 'MIT (Copyright (c) 2019 Zachary Rice), https://github.com/gitleaks/gitleaks/blob/master/LICENSE',
        'generator': 'scripts/port_gitleaks.py',
        'left_out': {'ids': skipped, 'why': 'path-scoped or path-only rules: a dataset row has no file path'},
        'allow_secret': [js_regex(x) for a in glob for x in a.get('regexes', [])],
        'stopwords': sorted({w for a in glob for w in a.get('stopwords', [])}),
        'rules': rules,
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write('\n')


main()
