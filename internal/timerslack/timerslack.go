// Package timerslack gives the whole daemon process a timer slack: how
// late the kernel may fire a thread's timers, so that it can fire several
// with one wake-up.
//
// Linux gives each thread 50 µs. The Go runtime's monitor thread (sysmon)
// sleeps 20 µs at a time for as long as any goroutine is busy, and in a
// virtual machine each of those wake-ups costs about as much CPU as it
// sleeps: measured, a fifth of the daemon's CPU in a burst of work
// (docs/PERFORMANCE.md, "the runtime's own wake-ups"). With a slack of a
// millisecond they come about a millisecond apart. Nothing the daemon
// does waits on a timer finer than tens of milliseconds, and what it
// answers on its socket is woken by the socket, not by a timer.
//
// A thread's slack is inherited by the threads it starts and kept across
// execve, but the runtime starts its monitor before main runs. So the
// program that executes the daemon gives it first (Exec: the continuityd
// front hands `run` to continuityd-daemon with Default), and the daemon,
// when its slack is not the one configured, sets it and executes itself
// again, once, in the same process (Ensure): every thread of the new image
// is born with it. Elsewhere than Linux, both only do what they would
// without it.
package timerslack

import "time"

// Default is the slack the daemon runs with unless daemon.timer_slack
// says otherwise (config.DefaultTimerSlack is this).
const Default = time.Millisecond

// reexecEnv marks the image Ensure executed, so that it executes at most
// once even if the kernel did not keep the slack. Ensure removes it from
// the environment, so programs the daemon starts never see it.
const reexecEnv = "CONTINUITYD_TIMERSLACK_REEXEC"

// Ensure makes slack the timer slack of every thread of this process.
// Zero or less leaves the slack the process has. When the calling thread's slack is
// slack already it returns nil at once; otherwise it sets it and executes
// this program again (the same arguments and environment, the same
// process id) and returns only if that could not be done, with the
// reason: the process then goes on with the slack it had.
//
// Call it first thing, before the program opens files or starts work a
// new image would repeat.
func Ensure(slack time.Duration) error { return ensure(slack) }

// Current returns the calling thread's timer slack.
func Current() (time.Duration, error) { return current() }
