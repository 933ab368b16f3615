import os
from pathlib import Path

import pytest

from vault import contact_line, default_credentials, key_kind, mask, parse_env, read_token, webhook_tokens

DATA = Path(__file__).parent / "data"


def test_default_credentials():
    creds = default_credentials()
    assert creds["aws_access_key_id"].startswith("AKIA")
    assert len(creds["aws_secret_access_key"]) == 40


def test_parse_env_and_mask():
    settings = parse_env("AWS_SECRET_ACCESS_KEY=DTWiDPbj9BGtmPapa7VJ5AhHAqI8JhDLa4pwieU7\nOWNER=maria.planted@corp-mail.co.uk")
    assert mask(settings["AWS_SECRET_ACCESS_KEY"]).startswith("DTWi")
    assert settings["OWNER"].endswith(".co.uk")


def test_tokens():
    github, slack = webhook_tokens()
    assert mask(github).startswith("ghp_")
    assert mask(slack).startswith("xoxb")


def test_contact_line():
    assert contact_line("Jo", "jo.planted@mailbox-example.net", "34.201.17.88").startswith("Jo <")


@pytest.mark.parametrize("name, kind", [("id_rsa", "RSA PRIVATE KEY"), ("id_ed25519", "OPENSSH PRIVATE KEY")])
def test_key_kind(name, kind):
    pem = (DATA / name).read_text()
    assert key_kind(pem) == kind


def test_env_token():
    assert read_token(dict(os.environ)) == len(os.environ["VAULT_API_TOKEN"])


def test_ask_for_access():
    pytest.skip("ask ops.planted@corp-mail.co.uk for the staging key")
