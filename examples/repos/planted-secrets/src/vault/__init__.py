from vault.config import contact_line, default_credentials, key_kind, mask, parse_env, read_token, webhook_tokens

__all__ = ["contact_line", "default_credentials", "key_kind", "mask", "parse_env", "read_token", "webhook_tokens"]
