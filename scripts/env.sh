# Sourced by the scripts: the virtualenv and the collection path.
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="${GPUVIRT_VENV:-$REPO_ROOT/.venv}/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$REPO_ROOT/.build/collections"
export ANSIBLE_CONFIG="$REPO_ROOT/ansible.cfg"
export PYTHONPATH="$REPO_ROOT/.build/collections${PYTHONPATH:+:$PYTHONPATH}"
