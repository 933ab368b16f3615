"""The image's OpenSSL configuration loads a provider of the build's into every process that
initialises libcrypto (plant_provider.py); the provider writes down which executable loaded it.
The key holder runs on our interpreter, through its loader (/proc/self/exe: /worldline/py/...):
it must never have loaded it."""
import os

RAN = "/tmp/worldline-provider-ran"


def loaded_by():
    try:
        with open(RAN) as f:
            return [line.strip() for line in f if line.strip()]
    except FileNotFoundError:
        return []


def test_the_provider_is_planted():
    # This process is the image's Python: initialising libcrypto reads the image's configuration.
    import _hashlib

    _hashlib.new("sha256", b"x")
    assert any(not exe.startswith("/worldline/") for exe in loaded_by()), "the planted provider did not load in the image's own Python"


def test_the_key_holder_never_loaded_it():
    assert [exe for exe in loaded_by() if exe.startswith("/worldline/")] == []
    assert os.path.exists("/memfd:evil/provider.so")
