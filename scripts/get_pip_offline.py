"""Stand-in for the pip bootstrap script that ansible-test downloads from a host these
machines cannot reach. ansible-test runs it as ``python get_pip_X.py <pip options>
<packages>`` inside a new virtualenv, with a trimmed environment; this installs the pip
bundled with the standard library (ensurepip), then lets that pip install the requested
packages (the pip release ansible-test asked for among them). The bundled pip does not
apply the machine's CA bundle from pip.conf, so it is passed as PIP_CERT."""

import ensurepip
import os
import subprocess
import sys

# get-pip's own flags, which pip install does not know.
OWN_FLAGS = ("--no-setuptools", "--no-wheel")
CA_BUNDLES = (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE"), "/etc/ssl/certs/ca-certificates.crt")

args = [arg for arg in sys.argv[1:] if arg not in OWN_FLAGS]
env = dict(os.environ)
bundle = next((path for path in CA_BUNDLES if path and os.path.exists(path)), None)
if bundle:
    env["PIP_CERT"] = bundle
ensurepip.bootstrap(upgrade=True)
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install"] + args, env=env))
