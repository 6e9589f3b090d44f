# Shared by the interop scripts (sourced, not run): stopping the `txncoord up`
# a script started, and showing its log when the script failed.

# alive PID: the process exists and is not a zombie (a SIGKILLed child of
# this shell stays one until the shell reaps it).
alive() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ $st != Z* ]]
}

# stop_pid PID: SIGTERM, up to 15 s for a clean stop, then SIGKILL.
stop_pid() {
	local pid=$1
	[ -n "$pid" ] && alive "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 150); do alive "$pid" || break; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null || true
}

# show_up_log RC: the last 40 lines of $WORK/up.log when RC says the script
# failed (the server's side of what went wrong).
show_up_log() {
	if [ "$1" -ne 0 ] && [ -f "$WORK/up.log" ]; then
		log "txncoord log (last 40 lines):"
		tail -n 40 "$WORK/up.log" >&2 || true
	fi
}
