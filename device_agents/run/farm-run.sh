#!/system/bin/sh
# farm-run: one run on the phone as ONE conversation with the host (one adb round trip).
#
#   sh farm-run.sh KEY=VALUE ... -- BENCHMARK ARGV ...
#
# farm.engine.runscript builds the parameters, farm.engine.steering reads what this prints and
# answers where it asks. POSIX sh only (Android's mksh and Debian's dash both run it) and toybox
# tools. Values arrive verbatim: KEY=VALUE parameters are split at the first "=" and only ever
# expanded in double quotes; the benchmark argv is "$@" after "--"; the list parameters (temps,
# policies, files, sampler, load, mem, cold, cold_end) are argv blocks the host quoted with
# shlex.quote, read back with `eval "set -- $block"` inside a function (so the benchmark's "$@" is kept).
#
# Steps: run folder; battery (the power_supply node; the host answers go|wait|stop); the screen
# held on; charging off as root, read back (the battery's status and level after it); cooldown (thermal nodes; go|wait|stop); sampler; gpuload until the host says it settled;
# the cold files' pages dropped from the page cache and counted (farm-pagecache: cold, cold_end);
# benchmark behind the memory gate (lifecycle.gated_argv) and its pid's memory sampler; its CPU
# mask, cpuset and cgroups read back; wait with
# the run timeout, a stop file and heartbeats, throttle samples (the caps and the pinned clock
# nodes every throttle_ms, dumpsys thermalservice's status every status_ms); stop load and
# samplers; battery reset and charging back on; environment; the run's files as one bundle; done.
#
# Out: one line per event, "TAG FIELDS"; a block is "begin NAME", "| LINE"..., "end NAME".
# In: after "ask NAME" one line: go | wait | stop. A closed stdin means stop. The battery and
# cooldown gates only ask when they would hold the run (battery_min, temp_limit_mc): a run that
# passes them costs no wait for the host's answer.

PROTO=1
dir= cache= battery=0 bat_dir= screen=0 charge_node= charge_off= charge_on= root_way=direct
cool=0 temps= policies= kgsl= clock_nodes= throttle_ms=1000 status_ms=5000 sampler= load= mem= files= env=1
max_bytes=0 affinity= gated=0 screen_restore= hal_first=0 repin= clock_pins= cold= cold_end=
battery_min= temp_limit_mc= idle_node= idle_fmt= idle_max_pct= idle_wait_ms=0
timeout_ms=600000 beat_s=1 beat_ms=1000 battery_poll_s=5 cool_poll_s=1 settle_poll_s=0.25

while [ "$#" -gt 0 ]; do
  case $1 in
    --) shift; break ;;
    *=*)
      key=${1%%=*}
      case $key in
        dir|cache|battery|bat_dir|screen|charge_node|charge_off|charge_on|root_way|cool|temps|policies|\
        battery_min|temp_limit_mc|idle_node|idle_fmt|idle_max_pct|idle_wait_ms|\
        kgsl|clock_nodes|throttle_ms|status_ms|sampler|load|mem|files|env|timeout_ms|beat_s|beat_ms|\
        battery_poll_s|cool_poll_s|settle_poll_s|max_bytes|affinity|gated|screen_restore|hal_first|\
        repin|clock_pins|cold|cold_end)
          eval "$key=\${1#*=}" ;;  # the name is one of the above; the value is not parsed
        *) printf 'error unknown parameter %s\n' "$key"; exit 2 ;;
      esac ;;
    *) printf 'error expected KEY=VALUE or --, got %s\n' "$1"; exit 2 ;;
  esac
  shift
done

top=$$
woke=0
hal=0
reply=go
ended=
way_used=
charging_off=0
screen_held=0 screen_timeout=
bpid=
started=
# One write(2) per node: a sysfs store judges each write on its own, and toybox 0.8.5-0.8.10's
# printf (Android 12-14) writes "%s" and "\n" separately, so the kernel takes the value and
# refuses the lone newline. The shell's echo writes the line at once. Success is what the node
# reads afterwards, not the write's status: a store may take the value and still fail the call.
WRITE='echo "$1" > "$2"; [ "$(cat "$2")" = "$1" ]'

# One line on stdout without a process: Android's mksh has no printf builtin (its printf is
# toybox's, a fork and exec per line, inside the measured window), but its `print` is one; dash's
# printf is a builtin. A closed stdout is a SIGPIPE (trapped: hangup) or a failed write: hang up.
if [ -n "${KSH_VERSION:-}" ]; then
  put() { print -r -- "$1"; }
else
  put() { printf '%s\n' "$1"; }
fi
say() { put "$*" || hangup; }

block() {  # stdin as the block $1
  say "begin $1"
  while IFS= read -r line || [ -n "$line" ]; do put "| $line"; done
  say "end $1"
}

ask() {  # the host's answer to $1, in $reply (stop when it hung up)
  say "ask $1"
  IFS= read -r reply || reply=stop
  case $reply in go|wait|stop) ;; *) reply=stop ;; esac
}

quote() {  # $1 in single quotes for `su -c` (sed only when it holds one itself)
  case $1 in
    *\'*) printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
    *) printf "'%s'" "$1" ;;
  esac
}

root_write() {  # $1 value to $2 node as root, read back; the way that worked in $way_used
  tried=
  for w in "$root_way" direct su-c su-0; do
    case " $tried " in *" $w "*) continue ;; esac
    tried="$tried $w"
    case $w in
      direct) sh -c "$WRITE" farm "$1" "$2" ;;
      su-c) su -c "sh -c $(quote "$WRITE") farm $(quote "$1") $(quote "$2")" ;;
      su-0) su 0 sh -c "$WRITE" farm "$1" "$2" ;;
      *) false ;;
    esac > /dev/null 2>&1 < /dev/null && { way_used=$w; return 0; }
  done
  return 1
}

spawn() {  # $1 name, $2 1 = signal this script when it ends, then argv. In the run folder, in the
  # background under a wrapper that writes NAME.pid and NAME.exit (pid_of reads the pid).
  n=$1 notify=$2
  shift 2
  rm -f "$n.pid" "$n.exit"
  (
    "$@" > "$n.out" 2> "$n.err" < /dev/null &
    echo "$!" > "$n.pid"
    wait "$!"
    echo "$?" > "$n.exit.tmp" && mv -f "$n.exit.tmp" "$n.exit"
    [ "$notify" = 1 ] && kill -s USR1 "$top" 2> /dev/null
  ) > /dev/null 2>&1 &
  [ "$n" = bench ] || started="$started $n"
}

pid_of() {  # the pid of program $1 in $bg_pid, waiting (at most ~5 s) for its wrapper to write it
  i=0
  while [ ! -s "$1.pid" ] && [ "$i" -lt 500 ]; do sleep 0.01; i=$((i + 1)); done
  bg_pid=
  read -r bg_pid < "$1.pid" 2> /dev/null
}

spawn_block() {  # $1 name, $2 argv block
  n=$1
  eval "set -- $2"
  spawn "$n" 0 "$@"
}

read_battery() {  # the block for the host, and the level for battery_ok. From the battery's
  # power_supply node (capacity %, temp in 0.1 C: what the health HAL hands BatteryService), in
  # dumpsys battery's `key: value` lines. Never `dumpsys battery unplug`: that freezes the
  # service's level and temperature and ends `svc power stayon`. dumpsys only without the node.
  if [ -n "$bat_dir" ] && val "$bat_dir/capacity" && [ -n "$v" ]; then
    echo "level: $v" > battery.txt
    val "$bat_dir/temp" && [ -n "$v" ] && echo "temperature: $v" >> battery.txt
  else
    dumpsys battery > battery.txt 2>&1
  fi
  level=
  while read -r key value rest; do [ "$key" = level: ] && [ -z "$level" ] && level=$value; done < battery.txt
  case $level in '' | *[!0-9]*) level= ;; esac
  block battery < battery.txt
}

battery_ok() {  # at or above the minimum: no need to ask the host (it reads the block anyway)
  [ -n "$battery_min" ] && [ -n "$level" ] && [ "$level" -ge "$battery_min" ]
}

to_mc() {  # a thermal node's integer value in millidegrees in $mc (as farm.device.android
  # .parse_thermal_c reads it: millidegrees, decidegrees or degrees); "" when not one
  mc=
  case ${1#-} in '' | *[!0-9]*) return 1 ;; esac
  a=${1#-}
  if [ "$a" -ge 1000 ]; then mc=$1; elif [ "$a" -ge 150 ]; then mc=$(($1 * 100)); else mc=$(($1 * 1000)); fi
  [ "$mc" -ge -40000 ] && [ "$mc" -le 150000 ] || mc=
}

val() {  # the first line of file $1 in $v ("" when unreadable): a builtin read, no process
  v=
  { IFS= read -r v || [ -n "$v" ]; } 2> /dev/null < "$1"  # the error's redirection first
}

hal_temps() {  # dumpsys thermalservice's sections, for the temperatures the thermal HAL reads
  # ("Current temperatures from HAL:"; farm.device.android.parse_hal_temperatures); shell may
  # read them (DUMP) where SELinux keeps it out of the thermal zones (Pixel's gs201 policy)
  dumpsys thermalservice 2> /dev/null | grep -e '^Thermal Status' -e '^Cached temperatures' \
    -e '^Current temperatures from HAL' -e '^Current cooling devices' -e 'Temperature{'
}

read_temps() {  # each readable thermal node; the thermal HAL's temperatures first when no thermal
  # zone is readable (hal_first=1: the host judges them, $hal=1 from then on and the throttle
  # samples carry them as the run's temperature trace); dumpsys battery when nothing else.
  # $cool_ok: the hottest node is at or below temp_limit_mc (no need to ask the host)
  cool_ok=0
  if [ "$hal_first" = 1 ]; then
    hal_out=$(hal_temps)
    case $hal_out in *'Temperature{'*) hal=1; put "$hal_out" | block thermalhal; return 0 ;; esac
  fi
  eval "set -- $temps"
  n=0
  hottest=
  say "begin temp"
  for f in "$@"; do
    if val "$f" && [ -n "$v" ]; then
      put "| $v"
      n=$((n + 1))
      to_mc "$v" && { [ -z "$hottest" ] || [ "$mc" -gt "$hottest" ]; } && hottest=$mc
    fi
  done
  say "end temp"
  [ "$n" = 0 ] && read_battery
  [ -n "$temp_limit_mc" ] && [ -n "$hottest" ] && [ "$hottest" -le "$temp_limit_mc" ] && cool_ok=1
}

throttle_sample() {  # what farm.engine.thermal.parse_sample reads; $1 = status: with dumpsys's
  # thermal status too (a binder call and a process: not every sample; the caps are sysfs reads)
  with_status=$1
  eval "set -- $policies"
  {
    for d in "$@"; do val "$d/scaling_max_freq"; echo "cpu $d $v"; done
    [ -n "$kgsl" ] && val "$kgsl/thermal_pwrlevel" && echo "kgsl $v"
    eval "set -- $clock_nodes"  # the pinned nodes: a power HAL may rewrite them mid-run
    for f in "$@"; do val "$f"; echo "node $f $v"; done
    if [ "$with_status" = status ] && [ "$hal" = 1 ]; then hal_temps
    elif [ "$with_status" = status ]; then dumpsys thermalservice 2> /dev/null | grep '^Thermal Status'; fi
  } | block throttle
}

repinned=0 repin_tries=0
REPIN_TRIES=3
any_changed() {  # true when some node of $broken_was (" node=value ...") reads another value
  for pair in $broken_was; do
    val "${pair%%=*}"
    [ "$v" = "${pair#*=}" ] || return 0
  done
  return 1
}

all_pinned() {  # true when every node of $broken reads its pin (clock_pins)
  eval "set -- $clock_pins"
  while [ "$#" -ge 2 ]; do
    case "$broken " in *" $1 "*) val "$1"; [ "$v" = "$2" ] || return 1 ;; esac
    shift 2
  done
}

repin_if_broken() {  # $1: ms since the benchmark began. A pinned node that no longer reads its
  # pin (a power HAL's hint rewrote it: farm.engine.clockhold) is written again: every broken
  # node as root (repin=pin), or fixed performance mode turned off and on (repin=fixed). Until it
  # holds, at most REPIN_TRIES times a run, one try a throttle sample: a boost's end can write
  # the HAL's default between the write and its read-back (Pixel's interaction boost lasts
  # 500 ms), and the next sample finds the node broken again. Each try says how it went; the
  # run stays flagged (the drift was seen while it measured); the host records the last try.
  [ "$repinned" = 0 ] && [ "$repin_tries" -lt "$REPIN_TRIES" ] && [ -n "$repin" ] \
    && [ -n "$clock_pins" ] || return 0
  at=$1
  eval "set -- $clock_pins"  # node pin node pin ...
  broken= broken_was=
  while [ "$#" -ge 2 ]; do
    val "$1"
    [ "$v" = "$2" ] || { broken="$broken $1"; broken_was="$broken_was $1=$v"; }
    shift 2
  done
  [ -n "$broken" ] || return 0
  repin_tries=$((repin_tries + 1))
  if [ "$repin" = fixed ]; then
    # Off, then on: asked again while on, Pixel's power HAL writes nothing (libperfmgr writes a
    # node only when its request changes: FileNode::Update); EndHint writes the defaults, then
    # DoHint the fixed clocks. The HAL writes from its looper thread after `cmd power` returned
    # (NodeLooperThread), and an off and an on it takes in one wake-up change no request: so
    # each step is awaited (1 s at most) on the broken nodes themselves, and success is judged
    # by reading them back.
    how=failed
    if cmd power set-fixed-performance-mode-enabled false > /dev/null 2>&1; then
      i=0
      while [ "$i" -lt 20 ] && ! any_changed; do sleep 0.05; i=$((i + 1)); done
      cmd power set-fixed-performance-mode-enabled true > /dev/null 2>&1 && how=fixed
      i=0
      while [ "$i" -lt 20 ] && ! all_pinned; do sleep 0.05; i=$((i + 1)); done
      all_pinned || how=failed
    fi
  else
    how= failed=0
    eval "set -- $clock_pins"
    while [ "$#" -ge 2 ]; do
      case " $broken " in
        *" $1 "*) if root_write "$2" "$1"; then how=${how:-$way_used}; else failed=1; fi ;;
      esac
      shift 2
    done
    [ "$failed" = 1 ] && how=failed
  fi
  [ "${how:-failed}" = failed ] || repinned=1
  say "repin $at ${how:-failed}$broken"
}

agent_block() {  # $1 block name, $2 argv block: the program's output (and errors) as that block
  n=$1
  eval "set -- $2"
  "$@" 2>&1 | block "$n"
}

start_mem() {  # the memory sampler on the benchmark's pid; without it the benchmark is told to go
  if [ -n "$mem" ] && [ -n "$bpid" ]; then
    eval "set -- $mem"
    spawn memsampler 0 "$@" "--watch-pid=$bpid"
  else
    : > bench.go
  fi
}

affinity_readback() {  # where the benchmark will run: the mask in force (toybox `taskset -p`),
  # its cpuset and cgroups. The kernel intersects a taskset mask with the caller's cpuset and
  # says nothing (kernel/sched/core.c __sched_setaffinity), so only a read-back shows a narrowed
  # pin. Read while the memory gate waits (it says so in bench.gate): taskset has pinned the pid,
  # which execs the program only after the memory sampler started (at most ~5 s here).
  i=0
  while [ "$gated" = 1 ] && [ ! -e bench.gate ] && [ ! -f bench.exit ] && [ "$i" -lt 500 ]; do
    sleep 0.01; i=$((i + 1))
  done
  val "/proc/$bpid/comm"
  {
    echo "requested ${affinity:--}"
    echo "comm ${v:--}"
    taskset -p "$bpid" 2>&1
    val "/proc/$bpid/cpuset" && echo "cpuset $v"
    while IFS= read -r line; do echo "cgroup $line"; done 2> /dev/null < "/proc/$bpid/cgroup"
  } | block affinity
}

wait_bench() {  # until the benchmark ends, the run timeout or the stop file
  t=0
  next_throttle=0 next_status=0
  while [ ! -f bench.exit ]; do
    if [ -e farm.stop ]; then kill -s KILL "$bpid" 2> /dev/null; ended=stopped; break; fi
    if [ "$t" -ge "$timeout_ms" ]; then kill -s KILL "$bpid" 2> /dev/null; ended=timeout; break; fi
    if [ "$t" -ge "$next_throttle" ]; then
      if [ "$t" -ge "$next_status" ]; then
        throttle_sample status
        next_status=$((next_status + status_ms))
      else
        throttle_sample
      fi
      repin_if_broken "$t"
      next_throttle=$((next_throttle + throttle_ms))
    fi
    say "beat $t"
    # A trapped USR1 (the benchmark's wrapper, when it ends) interrupts `wait` at once.
    sleep "$beat_s" &
    sp=$!
    [ "$woke" = 1 ] || [ -f bench.exit ] || wait "$sp" 2> /dev/null
    kill "$sp" 2> /dev/null
    t=$((t + beat_ms))
  done
  i=0  # a killed benchmark: its wrapper writes the status at once
  while [ ! -f bench.exit ] && [ "$i" -lt 100 ]; do sleep 0.02; i=$((i + 1)); done
  code=
  read -r code < bench.exit 2> /dev/null
  say "exit ${ended:-exited} ${code:-none}"
}

signal_each() {  # signal $1 to each started program (not the benchmark) that has not ended; the
  # memory sampler only with KILL (it ends by itself once the benchmark's pid is gone)
  for n in $started; do
    [ -f "$n.exit" ] && continue
    [ "$n" = memsampler ] && [ "$1" != KILL ] && continue
    p=
    read -r p < "$n.pid" 2> /dev/null
    [ -n "$p" ] && kill -s "$1" "$p" 2> /dev/null
  done
}

signal_stop() { signal_each TERM; }

wait_stopped() {  # until every started program ended (TERM again every 0.2 s), KILL after ~1 s
  i=0
  while [ "$i" -lt 50 ]; do
    left=0
    for n in $started; do [ -f "$n.exit" ] || left=1; done
    [ "$left" = 0 ] && return 0
    [ $((i % 10)) = 9 ] && signal_each TERM  # one started just now may not have had its pid yet
    sleep 0.02
    i=$((i + 1))
  done
  signal_each KILL
}

stop_all() { signal_stop; wait_stopped; }

battery_state() {  # $1 start|end: the charger driver's status and level, for the host's proof
  # that the battery alone powers the phone (a switch may leave it idle on USB power). The driver
  # reports a switch asynchronously (power_supply_changed): at the start, up to ~2 s for the
  # status to leave Charging.
  [ -n "$bat_dir" ] || return 0
  i=0
  while val "$bat_dir/status" && [ "$v" = Charging ] && [ "$1" = start ] && [ "$i" -lt 20 ]; do
    sleep 0.1; i=$((i + 1))
  done
  st=${v:--}
  val "$bat_dir/capacity"
  say "battery-state $1 ${v:--} $st"
}

hold_screen() {  # the screen on for the whole run, explicitly: the user-activity timeout at its
  # maximum (the phone's own value restored after) and a wake-up key as activity. `svc power
  # stayon` alone does not hold it: PowerManagerService holds only while BatteryService sees USB
  # power, which `dumpsys battery unplug` fakes away and an input-suspend switch really removes.
  # The value to restore is the host's (screen_restore: what its store marker keeps, so a run
  # after one that died holding the screen does not take the maximum for the phone's own).
  screen_timeout=${screen_restore:-$(settings get system screen_off_timeout 2> /dev/null)}
  settings put system screen_off_timeout 2147483647 > /dev/null 2>&1 && screen_held=1
  input keyevent KEYCODE_WAKEUP > /dev/null 2>&1
  # The key is queued (InputManager, then PowerManagerService): wait, 2 s at most, until the
  # phone says Awake, so that charging goes off and the run measures with the screen on.
  n=0
  while [ "$n" -lt 20 ]; do
    wakefulness
    case $w in Awake*) break ;; esac
    sleep 0.1
    n=$((n + 1))
  done
}

wakefulness() {  # PowerManagerService's wakefulness (Awake | Asleep | Dozing ...) -> $w, '' unknown
  w=$(dumpsys power 2> /dev/null | grep -m 1 'mWakefulness=')
  w=${w#*mWakefulness=}
}

screen_state() {  # $1 start|end
  wakefulness
  say "screen $1 ${w:--}"
}

release_screen() {  # the phone's own screen timeout back (none set: the setting deleted)
  [ "$screen_held" = 1 ] || return 0
  case $screen_timeout in
    '' | null) settings delete system screen_off_timeout > /dev/null 2>&1 ;;
    *) settings put system screen_off_timeout "$screen_timeout" > /dev/null 2>&1 ;;
  esac && say "screen-timeout restored"
  screen_held=0
}

restore() {  # charging back on (verified), then the screen timeout back (in that order: with
  # USB power back, stay-on holds the screen again)
  if [ "$charging_off" = 1 ]; then
    if root_write "$charge_on" "$charge_node"; then say "charging on $way_used"; charging_off=0
    else say "charging stuck"; fi
  fi
  release_screen
}

environment() {  # what farm.engine.collect.parse_environment reads
  {
    for d in /sys/devices/system/cpu/cpufreq/policy* /sys/devices/system/cpu/cpu[0-9]*/cpufreq; do
      [ -d "$d" ] || continue
      val "$d/scaling_governor"
      g=$v
      val "$d/scaling_cur_freq"
      echo "cpufreq $d $g $v"
    done
    for z in /sys/class/thermal/thermal_zone*; do
      [ -d "$z" ] || continue
      val "$z/type"
      ty=$v
      val "$z/temp"
      echo "thermal $ty $v"
    done
    [ -n "$charge_node" ] && val "$charge_node" && echo "charging $v"
  } | block env
}

nl='
'
bundle() {  # the run's files that exist: their sizes, then exactly that many bytes of each, back
  # to back; a file over max_bytes (when set) stays here and is named in the block `big`
  eval "set -- $files"
  sizes= big=
  for f do
    [ -f "$f" ] || continue
    s=$(wc -c < "$f") && s=$((s))
    if [ "$max_bytes" -gt 0 ] && [ "$s" -gt "$max_bytes" ]; then big="$big$s $f$nl"; continue; fi
    sizes="$sizes$s $f$nl"
  done
  [ -n "$big" ] && put "${big%"$nl"}" | block big
  { [ -z "$sizes" ] || put "${sizes%"$nl"}"; } | block sizes
  say data
  { [ -z "$sizes" ] || put "${sizes%"$nl"}"; } | while read -r s f; do head -c "$s" "$f"; done
}

hangup() {  # the host went away: nothing more can be said; stop everything, charging back on
  trap '' HUP PIPE TERM INT
  exec > /dev/null 2>&1
  kill -s KILL $bpid 2> /dev/null
  stop_all
  restore
  exit 1
}

trap 'woke=1' USR1
trap hangup HUP PIPE TERM INT

rm -rf "$dir" && mkdir -p "$dir" "$cache" && cd "$dir" || { say "error cannot create $dir"; exit 3; }
say "hello $PROTO $$"

if [ "$battery" = 1 ]; then
  read_battery
  battery_ok || ask battery
  while [ "$reply" = wait ]; do sleep "$battery_poll_s"; read_battery; battery_ok && { reply=go; break; }; ask battery; done
fi

[ "$screen" = 1 ] && [ "$reply" != stop ] && hold_screen

if [ -n "$charge_node" ] && [ "$reply" != stop ]; then
  if root_write "$charge_off" "$charge_node"; then say "charging off $way_used"; charging_off=1
  else
    # Failed, yet the node may have taken a value: unless it reads the enable value, restore
    # switches it back on (and says so), so the host keeps its marker until it does.
    val "$charge_node"
    [ "$v" = "$charge_on" ] || charging_off=1
    say "charging failed ${v:--}"
  fi
fi

if [ "$cool" = 1 ] && [ "$reply" != stop ]; then
  read_temps
  [ "$cool_ok" = 1 ] || ask cool
  while [ "$reply" = wait ]; do sleep "$cool_poll_s"; read_temps; [ "$cool_ok" = 1 ] && { reply=go; break; }; ask cool; done
fi

if [ "$reply" != stop ] && [ -n "$sampler" ]; then
  spawn_block sampler "$sampler"
  say "sampler -"
fi

if [ "$reply" != stop ] && [ -n "$load" ]; then
  spawn_block gpuload "$load"
  say "load -"
  while :; do
    sleep "$settle_poll_s"
    tail -n 2 gpuload.out 2> /dev/null | block load
    [ -f gpuload.exit ] && say "load-exit $(cat gpuload.exit)"
    ask settle
    [ "$reply" = wait ] || break
  done
fi

gpu_busy_pct() {  # the busy node in the probe's format (kgsl | pct | int | float) -> $busy_pct
  busy_pct=
  read -r b1 b2 _ < "$idle_node" 2> /dev/null || return 1
  case $idle_fmt in
    kgsl) [ "${b2:-0}" -gt 0 ] 2> /dev/null && busy_pct=$((b1 * 100 / b2)) || busy_pct=0 ;;
    float) i=${b1%%.*}; f=${b1#*.}; [ "$f" = "$b1" ] && f=; f=${f}00; f=${f%"${f#??}"}
           busy_pct=$(( ${i:-0} * 100 + ${f#0} )) ;;
    *) busy_pct=${b1%%[.%]*} ;;
  esac
  [ "$busy_pct" -ge 0 ] 2> /dev/null
}

# A cell without background load starts on an idle GPU: the counter still shows a previous run's
# load (or GPU kernels) until its window closes (kgsl: ~1 s), which would be this run's reading.
if [ "$reply" != stop ] && [ -z "$load" ] && [ -n "$idle_node" ] && [ "$#" -gt 0 ]; then
  waited_ms=0
  while gpu_busy_pct && [ "$busy_pct" -gt "$idle_max_pct" ] && [ "$waited_ms" -lt "$idle_wait_ms" ]; do
    sleep 0.1; waited_ms=$((waited_ms + 100))
  done
  say "gpu-idle ${busy_pct:--} $waited_ms"
fi

if [ "$reply" != stop ] && [ "$#" -gt 0 ]; then
  [ "$charging_off" = 1 ] && battery_state start  # after the gates: the charger has settled
  [ "$screen" = 1 ] && screen_state start
  # Last before the benchmark: nothing of ours reads the cold files between the drop and it.
  [ -n "$cold" ] && agent_block pagecache "$cold"
  spawn bench 1 "$@"
  pid_of bench
  bpid=$bg_pid
  say "bench ${bpid:-none}"
  [ -n "$bpid" ] && affinity_readback
  start_mem
  say "memsampler -"
  wait_bench
  [ -n "$cold_end" ] && agent_block pagecache-end "$cold_end"
  [ "$charging_off" = 1 ] && battery_state end
  [ "$screen" = 1 ] && screen_state end
  throttle_sample status
  [ -n "$load" ] && tail -n 2 gpuload.out 2> /dev/null | block load
fi

signal_stop  # while the load and the samplers end: charging back on, the environment
restore
[ "$env" = 1 ] && environment
wait_stopped
bundle
say "done $PROTO"
