# shellcheck shell=bash
# Sourced by scripts/test, scripts/demo and .ci/run: cd to the repository root and
# make sure .venv exists with `pip install -e ".[dev]"` done.
#
# The install is redone when .venv is missing or broken, or when pyproject.toml is
# newer than the .venv/.installed stamp. Set PYTHON to choose the interpreter
# (default: python3; must be >= 3.10).

TXQ_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$TXQ_ROOT"

txq_ensure_venv() {
    local python="${PYTHON:-python3}"
    local venv="$TXQ_ROOT/.venv"

    if [[ -e "$venv" ]] && ! "$venv/bin/python" -c '' 2>/dev/null; then
        echo "scripts/_venv.sh: $venv is broken (moved or its Python is gone); recreating" >&2
        rm -rf "$venv"
    fi
    if [[ ! -x "$venv/bin/python" ]]; then
        if ! command -v "$python" >/dev/null 2>&1; then
            echo "scripts/_venv.sh: $python not found; set PYTHON to a Python >= 3.10" >&2
            return 1
        fi
        if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
            echo "scripts/_venv.sh: $python is $("$python" -V 2>&1); txqueue needs >= 3.10" >&2
            return 1
        fi
        echo "scripts/_venv.sh: creating $venv with $("$python" -V 2>&1)" >&2
        rm -f "$venv/.installed"
        "$python" -m venv "$venv"
    fi
    if [[ ! -f "$venv/.installed" || "$TXQ_ROOT/pyproject.toml" -nt "$venv/.installed" ]]; then
        echo "scripts/_venv.sh: pip install -e \".[dev]\" into $venv (the first time takes a" \
            "minute or two; pip says what it collects and installs)" >&2
        rm -f "$venv/.installed"
        # pip's own lines (one per package collected, then the install) show the progress; on
        # stderr, so that what the script runs keeps stdout to itself.
        "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off \
            -e ".[dev]" >&2
        touch "$venv/.installed"
        echo "scripts/_venv.sh: installed" >&2
    fi
}

txq_ensure_venv
