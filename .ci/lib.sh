# Shared by .ci/run, the host lanes (.ci/verl, .ci/twinkle, .ci/openrlhf) and
# cookbook/run_demo.sh (sourced, not run): one line as each phase starts and one with its time
# as it ends, and a venv that pip installs into only when its requirements changed since the
# last complete install.

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

# editable_is_here VENV: whether VENV imports group_admission from this checkout's src/ (an
# editable install made in another clone, or in this one before it moved, imports that one).
# Isolated (-I): PYTHONPATH must not hide what the venv itself imports.
editable_is_here() {
  "$1/bin/python" -I - <<'PY' 2>/dev/null
import sys
from pathlib import Path

import group_admission

sys.exit(0 if Path(group_admission.__file__).resolve().is_relative_to(Path("src").resolve()) else 1)
PY
}

# ensure_venv VENV REQUIREMENTS ABOUT [editable] [no-deps FILE]: VENV with everything
# REQUIREMENTS pins (torch first and alone: half of the install). With "no-deps FILE", then
# the packages FILE pins without their dependencies (a host whose own pins cannot install
# here). With "editable", last this checkout without its dependencies. ABOUT says what the
# rest is and how long it takes. Skipped when VENV's stamp says it was already fully
# installed from the same files (and, editable, when it imports this checkout).
ensure_venv() {
  local venv=$1 requirements=$2 about=$3 editable="" nodeps=""
  shift 3
  while [ $# -gt 0 ]; do
    case $1 in
      editable) editable=editable ;;
      no-deps) nodeps=$2; shift ;;
      *) echo "ensure_venv: unknown option '$1'" >&2; return 2 ;;
    esac
    shift
  done
  local files=("$requirements" ${nodeps:+"$nodeps"})
  if venv_is_current "$venv" "${files[@]}" && { [ -z "$editable" ] || editable_is_here "$venv"; }; then
    echo "==> $venv already holds ${files[*]}: no install"
    return
  fi
  local python="$venv/bin/python"
  phase "creating $venv (python3 -m venv)" python3 -m venv "$venv"
  phase "upgrading pip in $venv" "$python" -m pip install --quiet --upgrade pip
  phase "installing torch into $venv (CPU build, 25-50 s)" \
    "$python" -m pip install --quiet "$(grep '^torch==' "$requirements")"
  if [ -n "$nodeps" ]; then
    phase "installing $nodeps into $venv (without dependencies)" \
      "$python" -m pip install --quiet --no-deps -r "$nodeps"
  fi
  if [ -n "$nodeps" ]; then
    # pip's check after the next install lists the pins of $nodeps left out on purpose.
    printf '    expected below: "ERROR: ... requires ..., which is not installed" lines from pip for the pins\n'
    printf '    of %s this venv leaves out on purpose (GPU-only builds, conflicting pins); not a failure\n' "$nodeps"
  fi
  phase "installing the rest of $requirements ($about)" "$python" -m pip install --quiet -r "$requirements"
  if [ "$editable" = editable ]; then
    phase "installing group-admission into $venv (editable, no dependencies)" \
      "$python" -m pip install --quiet --no-deps -e .
  fi
  mark_venv_current "$venv" "${files[@]}"
}

# ensure_dev_venv: .venv, the main job's and the suite's environment (1.7 GB).
ensure_dev_venv() {
  ensure_venv .venv requirements-dev.txt "transformers, TRL, the test tools; 30-90 s"
}
