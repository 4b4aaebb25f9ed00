# Container start hook of the albertkit image, read by every non-interactive bash through
# BASH_ENV (docker/Dockerfile sets it). It acts only in the bash that is the container's
# PID 1 and was given a command with -c: that is how SageMaker starts a job whose request
# names the SDK's driver (`/bin/bash -c "chmod +x .../sm_train.sh && .../sm_train.sh"`).
#
# Why: a bash that is PID 1 runs its command as a child and swallows SIGTERM (the kernel
# drops signals that PID 1 has no handler for, and bash defers traps until its child ends).
# SageMaker stops a job, and a spot interruption ends one, with SIGTERM to PID 1 followed by
# SIGKILL after the grace period, so without this hook the trainer never hears about it and
# the steps since the last checkpoint are lost.
#
# What it does, in that bash only:
#   1. makes this container's SSH host keys (the image ships none);
#   2. runs the original command as a child and waits for it;
#   3. on SIGTERM/SIGINT, sends the signal to the trainers registered in
#      $ALBERTKIT_TRAINER_DIR (albertkit's entry point writes its PID there): they write a
#      checkpoint and exit, then the driver chain above them ends by itself. Before any
#      trainer has registered, the signal goes to every process of the container instead.
#   4. exits with the command's status once it has ended.
# Everywhere else (any other bash, build steps, interactive shells) it does nothing.
#
# Tested without an image by tests/test_sagemaker_signals.py.

if [[ $$ -eq 1 && -n "${BASH_EXECUTION_STRING:-}" && -z "${ALBERTKIT_CONTAINER_STARTED:-}" ]]; then
  export ALBERTKIT_CONTAINER_STARTED=1
  export ALBERTKIT_TRAINER_DIR="${ALBERTKIT_TRAINER_DIR:-/run/albertkit/trainers}"
  mkdir -p "$ALBERTKIT_TRAINER_DIR"

  if command -v ssh-keygen >/dev/null 2>&1 && [[ -d /etc/ssh ]] \
      && ! compgen -G "/etc/ssh/ssh_host_*_key" >/dev/null; then
    ssh-keygen -A >/dev/null 2>&1 || echo "albertkit: could not create SSH host keys" >&2
  fi

  _albertkit_forward() {
    local sig="$1" file pid sent=0
    for file in "$ALBERTKIT_TRAINER_DIR"/*; do
      [[ -f "$file" ]] || continue
      pid="${file##*/}"
      if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
        kill -s "$sig" "$pid" 2>/dev/null && sent=$((sent + 1))
      fi
    done
    if [[ $sent -gt 0 ]]; then
      echo "albertkit: SIG$sig forwarded to $sent trainer process(es)" >&2
    else
      # no trainer yet (still starting): stop everything; from PID 1, -1 means every other
      # process of this PID namespace
      echo "albertkit: SIG$sig before training started: stopping all processes" >&2
      kill -s "$sig" -1 2>/dev/null
    fi
  }

  /bin/bash -c "$BASH_EXECUTION_STRING" &
  _albertkit_child=$!
  trap '_albertkit_forward TERM' TERM
  trap '_albertkit_forward INT' INT
  while :; do
    wait "$_albertkit_child"
    _albertkit_status=$?
    # `wait` also returns when a trapped signal arrives: keep waiting while the child lives
    kill -0 "$_albertkit_child" 2>/dev/null || break
  done
  exit "$_albertkit_status"
fi
