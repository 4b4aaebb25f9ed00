#!/usr/bin/env bash
# Run albertkit's SageMaker job request the way SageMaker runs a training job, on this
# machine: two containers (algo-1, algo-2) of the training image, each in its own network
# namespace, joined by veth pairs on a bridge that lives in a third namespace (the host's
# network is never touched; the only addresses are the containers' own 10.213.0.0/24).
#
#   sudo scripts/simulate_sagemaker.sh                   # (a)-(f), about 25-40 min on 2 cores
#   sudo scripts/simulate_sagemaker.sh --only a,c        # a subset (--only e: the chain)
#
# Needs: root (namespaces, mounts), buildah with the image built by scripts/build_image.sh,
# and a Python environment with albertkit[test] (SageMaker SDK v3, moto) for the host side:
# scripts/sagemaker_sim.py stages the job (to_sagemaker(...) of a tiny config, submitted to
# moto; the uploaded code/sm_drivers/data channels are read back) and checks the results.
#
# Each container: the image's root file system under a private overlay, /opt/ml bound from
# the staged host directory, its own PID namespace whose PID 1 is the request's
# ContainerEntrypoint + ContainerArguments (`/bin/bash -c "... sm_train.sh"`: the SDK's
# driver, which runs albertkit's MPI driver or its basic script driver), the image's ENV plus
# the request's Environment, hostname algo-N, interface eth0.
#
# What is shown:
#   (a) Horovod over MPI, one rank per host: trains to the end, /opt/ml/model holds the model
#       in albertkit and Hugging Face formats, every metric log line is caught by the
#       request's MetricDefinitions
#   (b) the same job with tf_multiworker (TF_CONFIG made from SM_HOSTS by the entry point)
#   (c) the dotted hyperparameter optimizer.learning_rate (sent as optimizer__learning_rate)
#       reaches the config inside the container
#   (d) SIGTERM to PID 1 of both containers mid-run (what a stop or a spot interruption
#       does): a checkpoint is written and both exit within SageMaker's 120 s grace period;
#       the job started again on the synced checkpoints resumes and ends with weights
#       bit-identical to the uninterrupted run (a)
#   (e) the acceptance chain, as the docs tell users, in the project directory WORK/chain:
#       `albertkit train-tokenizer` + `albertkit prepare-data` -> a pretraining job (Horovod
#       over MPI, 2 hosts) -> its /opt/ml/model as model.tar.gz, unpacked to (moto's) S3 ->
#       a SQuAD v2.0 job on 1 host whose only model input is that artifact's hf/ (the
#       tokenizer included) -> `albertkit evaluate` (official metric) and `albertkit
#       evaluate-squad` on the downloaded artifact -> `albertkit export`; every command is
#       timed into WORK/chain/times.tsv
#   (f) a plugin travels with its job: a one-host fine-tuning job whose config's data kind
#       and task come from a plugin (--plugin, --plugin-config), shipped with
#       `sagemaker.plugins`; its wheel rides in the code channel, the entry point installs it
#       before parsing the config, the job trains and writes its model artifact
#
# Options:
#   --image NAME   training image                           (default: albertkit:latest)
#   --work DIR     staging and results                      (default: /var/tmp/albertkit-sim)
#   --only LIST    comma-separated subset of a,b,c,d,e,f    (default: all; c rides on a)
#   --plugin DIR   (f): the plugin's source directory       (default: examples/plugins/albertkit-tagging)
#   --plugin-config FILE  (f): a config using the plugin's task (default: the one YAML file
#                  in the plugin's directory); scripts/sagemaker_sim_plugin.py
#                  make-tiny-plugin --out DIR writes a small plugin to try (f) with
#   CHAIN_TOKENIZER=manifest|channel  (e): whether the pretraining config names no tokenizer
#                  (the prepared data's travels with it; the default) or data.tokenizer plus
#                  a `tokenizer` input channel
#   --python PATH  host Python with albertkit[test]         (default: python3)
#   --timeout S    limit for one job run                    (default: 1800)
#   -h, --help     this text
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"

IMAGE="albertkit:latest"
WORK="/var/tmp/albertkit-sim"
ONLY="a,b,c,d,e,f"
PLUGIN_DIR="examples/plugins/albertkit-tagging"
PLUGIN_CONFIG=""
CHAIN_TOKENIZER="${CHAIN_TOKENIZER:-manifest}"
PY="${PYTHON:-python3}"
RUN_TIMEOUT=1800
GRACE=120          # SageMaker: SIGKILL 120 s after SIGTERM
STORAGE="${BUILDAH_STORAGE_DRIVER:-vfs}"
SUBNET="10.213.0"

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
die() { echo "simulate_sagemaker.sh: error: $*" >&2; exit 1; }
say() { echo "simulate_sagemaker.sh: $*"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --image) IMAGE="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --plugin) PLUGIN_DIR="$2"; shift 2 ;;
    --plugin-config) PLUGIN_CONFIG="$2"; shift 2 ;;
    --python) PY="$2"; shift 2 ;;
    --timeout) RUN_TIMEOUT="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
want() { [[ ",$ONLY," == *",$1,"* ]]; }

[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, mounts, chroot)"
for tool in buildah ip unshare chroot; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
done
"$PY" -c "import albertkit, sagemaker.train, moto" 2>/dev/null \
  || die "$PY lacks albertkit[test] (SageMaker SDK, moto): pip install -e '.[test]' or --python"
B=(buildah --storage-driver "$STORAGE")
"${B[@]}" inspect --type image "$IMAGE" >/dev/null 2>&1 \
  || die "image $IMAGE not found: run scripts/build_image.sh first"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
HOSTS=(algo-1 algo-2)
T0=$SECONDS

# --------------------------------------------------------------------------- image rootfs
CTR=""
cleanup() {
  local ns
  for ns in sm-algo-1 sm-algo-2 sm-net; do ip netns del "$ns" 2>/dev/null || true; done
  if [[ -n "$CTR" ]]; then
    "${B[@]}" umount "$CTR" >/dev/null 2>&1 || true
    "${B[@]}" rm "$CTR" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
CTR="$("${B[@]}" from --pull-never --name "albertkit-sim-$$" "$IMAGE")"
IMG="$("${B[@]}" mount "$CTR")"
# the image's ENV, as the container runtime applies it (PATH, BASH_ENV, ...)
mapfile -t IMAGE_ENV < <("${B[@]}" inspect --type image \
  --format '{{range .Docker.Config.Env}}{{println .}}{{end}}' "$IMAGE" | sed '/^$/d')
say "image $IMAGE mounted at $IMG (${#IMAGE_ENV[@]} ENV entries)"

# --------------------------------------------------------------------------- network
# A bridge in its own namespace; each host namespace gets eth0 (one end of a veth pair).
ip netns add sm-net
ip -n sm-net link add smbr0 type bridge
ip -n sm-net link set smbr0 up
for i in 1 2; do
  ip netns add "sm-algo-$i"
  ip -n sm-net link add "veth$i" type veth peer name "peer$i"
  ip -n sm-net link set "peer$i" netns "sm-algo-$i"
  ip -n "sm-algo-$i" link set "peer$i" name eth0
  ip -n sm-net link set "veth$i" master smbr0 up
  ip -n "sm-algo-$i" addr add "$SUBNET.1$i/24" dev eth0
  ip -n "sm-algo-$i" link set eth0 up
  ip -n "sm-algo-$i" link set lo up
done
say "network: algo-1=$SUBNET.11 algo-2=$SUBNET.12 (namespaces sm-algo-1, sm-algo-2, bridge in sm-net)"

# --------------------------------------------------------------------------- one job run
# start_host RUN i: container algo-i of staged run RUN, in the background; sets PID_HOST[i]
# (the unshare process) and PID1[i] (host PID of the container's PID 1).
declare -A PID_HOST PID1
start_host() {
  local run="$WORK/$1" i="$2" host="algo-$2"
  local box="$run/$host/box"
  rm -rf "$box"
  mkdir -p "$box/upper" "$box/work" "$box/root"
  local envs=("${IMAGE_ENV[@]}" "HOME=/root" "HOSTNAME=$host")
  local line
  while IFS= read -r line; do [[ -n "$line" ]] && envs+=("$line"); done <"$run/run.env"
  local cmd=()
  mapfile -t cmd <"$run/command"
  # the setup shell is PID 1 until it execs the entry point (it does not read BASH_ENV)
  ip netns exec "sm-algo-$i" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    unshare --mount --uts --ipc --pid --fork --propagation private \
    /bin/bash -c '
      set -e
      img="$1"; box="$2"; opt="$3"; host="$4"; shift 4
      mount -t overlay overlay -o "lowerdir=$img,upperdir=$box/upper,workdir=$box/work" "$box/root"
      r="$box/root"
      hostname "$host"
      printf "127.0.0.1 localhost\n%s algo-1\n%s algo-2\n" "'"$SUBNET"'.11" "'"$SUBNET"'.12" >"$r/etc/hosts"
      echo "$host" >"$r/etc/hostname"
      mount -t proc proc "$r/proc"
      mount -t sysfs sysfs "$r/sys"
      mount --rbind /dev "$r/dev"
      mount -t tmpfs tmpfs "$r/dev/shm"
      mount -t tmpfs tmpfs "$r/tmp"
      mount --bind "$opt" "$r/opt/ml"
      n=0; for a in "$@"; do [[ "$a" == -- ]] && break; n=$((n + 1)); done
      envs=("${@:1:$n}"); shift $((n + 1))
      exec chroot "$r" /usr/bin/env -i "${envs[@]}" "$@"
    ' sim "$IMG" "$box" "$run/$host/opt/ml" "$host" "${envs[@]}" -- "${cmd[@]}" \
    >"$run/$host.log" 2>&1 &
  PID_HOST[$i]=$!
  local t=0 kids=""
  while [[ -z "$kids" && $t -lt 100 ]]; do
    kids="$(cat "/proc/${PID_HOST[$i]}/task/${PID_HOST[$i]}/children" 2>/dev/null || true)"
    sleep 0.1; t=$((t + 1))
  done
  [[ -n "$kids" ]] || die "$host did not start (see $run/$host.log)"
  PID1[$i]="${kids%% *}"
}

# wait_hosts RUN [DEADLINE_S]: wait for both containers; print their exit codes; kill on timeout
wait_hosts() {
  local run="$1" limit="${2:-$RUN_TIMEOUT}" start=$SECONDS i
  local n; n="$(wc -l <"$WORK/$run/hosts" 2>/dev/null || echo 2)"
  local ids; ids=($(seq 1 "$n"))
  while :; do
    local alive=0
    for i in "${ids[@]}"; do kill -0 "${PID_HOST[$i]}" 2>/dev/null && alive=1; done
    [[ $alive -eq 0 ]] && break
    if (( SECONDS - start > limit )); then
      say "$run: still running after ${limit}s: SIGKILL"
      for i in "${ids[@]}"; do kill -9 "${PID1[$i]}" 2>/dev/null || true; done
      sleep 2
      break
    fi
    sleep 1
  done
  EXIT[2]=0  # a one-host job has no algo-2
  for i in "${ids[@]}"; do
    local code=0
    wait "${PID_HOST[$i]}" || code=$?
    EXIT[$i]=$code
  done
}

declare -A EXIT
run_job() {  # run_job NAME: every host the staged request has (WORK/NAME/hosts)
  local name="$1" n i
  n="$(wc -l <"$WORK/$name/hosts" 2>/dev/null || echo 2)"
  say "($name) starting $(paste -sd' ' "$WORK/$name/hosts" 2>/dev/null || echo algo-1 algo-2)"
  local start=$SECONDS
  for i in $(seq 1 "$n"); do start_host "$name" "$i"; done
  wait_hosts "$name"
  say "($name) exit codes algo-1=${EXIT[1]} algo-2=${EXIT[2]} after $((SECONDS - start)) s"
}

stage() {  # stage NAME BACKEND
  "$PY" scripts/sagemaker_sim.py stage --work "$WORK" --name "$1" --backend "$2"
}
check() {  # check NAME ARGS...
  local name="$1"; shift
  say "($name) checks:"
  "$PY" scripts/sagemaker_sim.py check --work "$WORK" --name "$name" "$@"
}

FAILED=()
result() { if [[ "$2" -eq 0 ]]; then say "PASS $1"; else say "FAIL $1"; FAILED+=("$1"); fi; }

# --------------------------------------------------------------------------- (a) + (c)
if want a || want c || want d; then
  stage horovod horovod
  run_job horovod
  status=0
  [[ "${EXIT[1]}" -eq 0 && "${EXIT[2]}" -eq 0 ]] || status=1
  check horovod --expect completed || status=1
  result "(a) Horovod over MPI, 2 ranks: trained, model in albertkit + HF formats, metrics caught; (c) dotted override reached the config" $status
fi

# --------------------------------------------------------------------------- (b)
if want b; then
  stage multiworker tf_multiworker
  run_job multiworker
  status=0
  [[ "${EXIT[1]}" -eq 0 && "${EXIT[2]}" -eq 0 ]] || status=1
  check multiworker --expect completed || status=1
  result "(b) tf_multiworker over 2 hosts (TF_CONFIG from SM_HOSTS)" $status
fi

# --------------------------------------------------------------------------- (d)
if want d; then
  stage stopped horovod
  say "(stopped) starting; SIGTERM to PID 1 of both containers once step 15 is logged"
  start_host stopped 1
  start_host stopped 2
  t=0
  until grep -q "albertkit step=1[5-9]" "$WORK/stopped/algo-1.log" 2>/dev/null; do
    kill -0 "${PID_HOST[1]}" 2>/dev/null || break
    (( t++ > RUN_TIMEOUT )) && break
    sleep 1
  done
  sig_at=$SECONDS
  kill -TERM "${PID1[1]}" "${PID1[2]}"
  wait_hosts stopped "$GRACE"
  took=$((SECONDS - sig_at))
  say "(stopped) both containers ended ${took} s after SIGTERM (grace ${GRACE} s); exit codes ${EXIT[1]}/${EXIT[2]}"
  status=0
  (( took < GRACE )) || status=1
  check stopped --expect interrupted || status=1
  # a spot restart: SageMaker syncs each host's checkpoint dir to checkpoint_s3_uri and, when
  # the job starts again, downloads that prefix into every host's checkpoint dir
  stage resumed horovod
  s3="$WORK/stopped/checkpoint-s3"
  rm -rf "$s3"; mkdir -p "$s3"
  for h in algo-2 algo-1; do cp -a "$WORK/stopped/$h/opt/ml/checkpoints/." "$s3/"; done
  for h in "${HOSTS[@]}"; do cp -a "$s3/." "$WORK/resumed/$h/opt/ml/checkpoints/"; done
  run_job resumed
  [[ "${EXIT[1]}" -eq 0 && "${EXIT[2]}" -eq 0 ]] || status=1
  grep -q "resum" "$WORK/resumed/algo-1.log" || say "(resumed) note: no 'resum' line in the log"
  check resumed --expect completed --same-as horovod || status=1
  result "(d) SIGTERM -> checkpoint + exit in ${took} s (< ${GRACE} s); restart resumed, final weights bit-identical to (a)" $status
fi

# --------------------------------------------------------------------------- (e)
# The acceptance chain, driven as the docs tell users, in the user's project directory
# $WORK/chain: each command is printed and timed into $WORK/chain/times.tsv.
if want e; then
  CH="$WORK/chain"
  # a fresh project each time: the chain's own earlier files (prepared data that names its
  # tokenizer) would make train-tokenizer refuse, as it should for a user
  rm -rf "$CH"; mkdir -p "$CH"
  TIMES="$CH/times.tsv"
  printf 'stage\tseconds\tresult\tcommand\n' >"$TIMES"
  status=0
  # timed LABEL CMD...: run CMD (in $CH), log it, record its time and exit code
  timed() {
    local label="$1"; shift
    local t0 code=0
    t0=$(date +%s)
    say "(e) [$label] \$ $*"
    (cd "$CH" && "$@") >"$CH/$label.log" 2>&1 || code=$?
    tail -n 25 "$CH/$label.log" | sed 's/^/    /'
    printf '%s\t%s\t%s\t%s\n' "$label" "$(( $(date +%s) - t0 ))" "$code" "$*" >>"$TIMES"
    [[ $code -eq 0 ]] || { status=1; say "(e) [$label] failed ($code): $CH/$label.log"; }
    return $code
  }
  AK=("$PY" -m albertkit.cli)   # the `albertkit` command of this checkout
  sim=("$PY" "$REPO/scripts/sagemaker_sim.py")
  run_chain() {
    timed files "${sim[@]}" chain-files --work "$WORK" --tokenizer-from "$CHAIN_TOKENIZER" || return
    timed tokenizer "${AK[@]}" train-tokenizer corpus.txt --out tokenizer --vocab-size 600 || return
    timed prepare-data "${AK[@]}" prepare-data corpus.txt --tokenizer tokenizer \
      --out data/pretrain --seq-length 64 --max-predictions-per-seq 8 --dupe-factor 2 \
      --eval-fraction 0.2 --num-workers 1 --no-progress || return
    timed stage-pretrain "${sim[@]}" chain-stage --work "$WORK" --job pretrain || return
    local t0; t0=$(date +%s)
    run_job chain-pretrain
    printf '%s\t%s\t%s\t%s\n' job-pretrain "$(( $(date +%s) - t0 ))" "${EXIT[1]}/${EXIT[2]}" \
      "2 containers: the request's ContainerEntrypoint + ContainerArguments" >>"$TIMES"
    [[ "${EXIT[1]}" -eq 0 && "${EXIT[2]}" -eq 0 ]] || { status=1; return 1; }
    timed check-pretrain "${sim[@]}" chain-check --work "$WORK" --job pretrain || return
    # what SageMaker uploads at the end of the job: /opt/ml/model as model.tar.gz
    timed model-tar tar -C "$WORK/chain-pretrain/algo-1/opt/ml/model" -czf model.tar.gz . || return
    timed stage-squad "${sim[@]}" chain-stage --work "$WORK" --job squad \
      --artifact model.tar.gz || return
    t0=$(date +%s)
    run_job chain-squad
    printf '%s\t%s\t%s\t%s\n' job-squad "$(( $(date +%s) - t0 ))" "${EXIT[1]}" \
      "1 container: the request's ContainerEntrypoint + ContainerArguments" >>"$TIMES"
    [[ "${EXIT[1]}" -eq 0 ]] || { status=1; return 1; }
    timed check-squad "${sim[@]}" chain-check --work "$WORK" --job squad || return
    # the user's machine: the SQuAD job's model.tar.gz, evaluated and exported
    tar -C "$WORK/chain-squad/algo-1/opt/ml/model" -czf "$CH/squad-model.tar.gz" .
    rm -rf "$CH/squad-model" "$CH/exported"; mkdir -p "$CH/squad-model"
    timed untar tar -xzf squad-model.tar.gz -C squad-model || return
    local tok=()  # channel: the tokenizer is named, as before it travelled with the model
    [[ "$CHAIN_TOKENIZER" == channel ]] && tok=(--set data.tokenizer=squad-model/albertkit/tokenizer)
    timed evaluate "${AK[@]}" evaluate --config squad.yaml --run-dir squad-model/albertkit \
      --set model.load_from=squad-model/albertkit "${tok[@]}" || return
    timed official-metric "${AK[@]}" evaluate-squad data/squad/dev-v2.0.json \
      squad-model/albertkit/squad_eval/predictions.json \
      --na-prob-file squad-model/albertkit/squad_eval/null_odds.json || return
    timed export "${AK[@]}" export --format hf squad-model/albertkit exported/albert-squad || return
    timed check-local "${sim[@]}" chain-check-local --work "$WORK" || return
  }
  run_chain || status=1
  column -t -s $'\t' "$TIMES" | sed 's/^/    /'
  result "(e) the chain: prepare-data -> Horovod pretraining job (2 hosts) -> model.tar.gz -> SQuAD job (1 host, model and tokenizer from that artifact only) -> official metric -> export" $status
fi

# --------------------------------------------------------------------------- (f)
# A fine-tuning job whose task is a plugin's: the plugin's source directory is shipped with
# sagemaker.plugins (built into a wheel at submission, installed by the entry point).
if want f; then
  status=0
  t0=$SECONDS
  if [[ ! -f "$PLUGIN_DIR/pyproject.toml" ]]; then
    say "(f) $PLUGIN_DIR is not a plugin's source directory (no pyproject.toml); see --plugin"
    status=1
  else
    pargs=(--work "$WORK" --plugin "$(cd "$PLUGIN_DIR" && pwd)")
    [[ -n "$PLUGIN_CONFIG" ]] && pargs+=(--config "$(cd "$(dirname "$PLUGIN_CONFIG")" && pwd)/$(basename "$PLUGIN_CONFIG")")
    if "$PY" scripts/sagemaker_sim_plugin.py stage "${pargs[@]}"; then
      run_job plugin
      [[ "${EXIT[1]}" -eq 0 ]] || status=1
      say "(plugin) checks:"
      "$PY" scripts/sagemaker_sim_plugin.py check --work "$WORK" || status=1
    else
      status=1
    fi
  fi
  result "(f) a plugin's task on SageMaker: shipped with sagemaker.plugins, installed by the entry point, trained, model written ($((SECONDS - t0)) s)" $status
fi

say "wall time $((SECONDS - T0)) s; logs and /opt/ml trees in $WORK"
if [[ ${#FAILED[@]} -gt 0 ]]; then
  say "${#FAILED[@]} part(s) failed"
  exit 1
fi
say "all requested parts passed"
