# Shared by .ci/run, .ci/verl and cookbook/run_demo.sh (sourced, not run): one line as each
# phase starts and one with its time as it ends, and a venv that pip installs into only when
# its requirements changed since the last complete install.

# phase LABEL COMMAND...: print "==> LABEL", run COMMAND, print how long it took.
phase() {
  local label=$1 started=$SECONDS
  shift
  printf '==> %s\n' "$label"
  "$@"
  printf '    %s: %ss\n' "${label%% (*}" "$((SECONDS - started))"
}

# requirements_stamp FILE...: the hash of the files that decide what a venv holds (and of the
# interpreter that built it). pyproject.toml is included: the editable install reads it.
requirements_stamp() {
  { python3 --version; cat "$@" pyproject.toml; } | sha256sum | cut -d' ' -f1
}

# venv_is_current VENV FILE...: whether VENV was fully installed from these exact files.
venv_is_current() {
  local venv=$1
  shift
  [ -x "$venv/bin/python" ] && [ -f "$venv/.requirements-stamp" ] \
    && [ "$(cat "$venv/.requirements-stamp")" = "$(requirements_stamp "$@")" ]
}

# mark_venv_current VENV FILE...: record a complete install (only after every pip call passed).
mark_venv_current() {
  local venv=$1
  shift
  requirements_stamp "$@" >"$venv/.requirements-stamp"
}

# new_venv VENV: create VENV (kept if it exists) with a current pip.
new_venv() {
  phase "creating $1 (python3 -m venv)" python3 -m venv "$1"
  phase "upgrading pip in $1" "$1/bin/python" -m pip install --quiet --upgrade pip
}

# ensure_dev_venv: .venv with requirements-dev.txt (the main job's and the suite's environment).
ensure_dev_venv() {
  if venv_is_current .venv requirements-dev.txt; then
    echo "==> .venv already holds requirements-dev.txt: no install"
    return
  fi
  new_venv .venv
  # torch first and alone: it is half of the install (about 0.9 GB of the venv's 1.7 GB).
  phase "installing torch (CPU build, 25-50 s)" \
    .venv/bin/python -m pip install --quiet "$(grep '^torch==' requirements-dev.txt)"
  phase "installing the rest of requirements-dev.txt (30-90 s)" \
    .venv/bin/python -m pip install --quiet -r requirements-dev.txt
  mark_venv_current .venv requirements-dev.txt
}
