"""Settings helpers whose traces carry secrets in source lines, locals and return values."""


def default_credentials():
    key_id = "AKIAY2GRRRZPYRAY64HM"
    secret = "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"
    return {"aws_access_key_id": key_id, "aws_secret_access_key": secret}


def webhook_tokens():
    github = "ghp_0gyMDtiNUsS5HQQYRCiYCQ9aHWdtCNveKjGp"
    slack = "xoxb-244798866055-9857312225358-dQofLoWTx4liBRUzj2nrFJyR"
    return [github, slack]


def parse_env(text):
    settings = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        settings[key.strip()] = value.strip()
    return settings


def mask(value):
    head = value[:4]
    return head + "*" * (len(value) - 4)


def contact_line(name, email, host):
    line = f"{name} <{email}> via {host}"
    return line


def key_kind(pem):
    first = pem.strip().splitlines()[0]
    return first.strip("-").replace("BEGIN ", "")


def read_token(env):
    token = env.get("VAULT_API_TOKEN", "")
    return len(token)
