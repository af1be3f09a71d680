#!/usr/bin/env bash
# pip install, tried again when it fails: the package registries drop connections. A CI run (2026-11-27) failed
# when TensorFlow's 572 MB wheel broke off at 425.7 MB and each of pip's own resumes broke off at that same byte;
# a fresh try downloads the file from its start. PIP_TRIES tries (default 3), then pip's own failure stands
# (a failure that is not the network's, a resolver conflict, is tried again too: it costs seconds).
#
#   tools/pip_install.sh PYTHON ARGS...      # runs PYTHON -m pip install --retries 10 ARGS...
set -uo pipefail
python=$1
shift
tries=${PIP_TRIES:-3}
if ! [[ $tries =~ ^[1-9][0-9]*$ ]]; then
    echo "tools/pip_install.sh: PIP_TRIES=$tries: give a whole number of tries, 1 or more (default 3)" >&2
    exit 2
fi
for ((try = 1; ; try++)); do
    "$python" -m pip install --retries 10 "$@"
    status=$?
    if [ "$status" -eq 0 ]; then
        exit 0
    fi
    if [ "$try" -ge "$tries" ]; then
        echo "tools/pip_install.sh: pip install failed $try times (exit $status): pip's error is above (a dropped download: run make again)" >&2
        exit "$status"
    fi
    echo "tools/pip_install.sh: pip install failed (exit $status), try $try of $tries; trying again" >&2
done
