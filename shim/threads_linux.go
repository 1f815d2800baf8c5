package shim

import (
	"os"
	"runtime"
	"sync"
)

// warmedThreads is how many OS threads stage 0, the one Go stage that
// stays in the session, starts at once. With the runtime's own (sysmon,
// the signal thread) it has about 12, and with stage 1 (C, one thread)
// stays within the 32 tasks the supervisor adds to the session's pids
// limit for the shim (supervisor/engine/session ShimTasks).
const warmedThreads = 8

// warmThreads makes the Go runtime start n OS threads now, while the
// session's pids limit has room, and keep them idle for later: stage 0,
// which waits in the session, shares the limit with the program, which
// may use it all (a fork bomb), and a Go runtime that then needs a
// thread it cannot create dies ("failed to create new OS thread"): a Go
// PID 1 died that way in the VM lane, and the session ended "exited 2"
// instead of by its limit. (Stage 1, PID 1, is C now and needs none: it
// has one thread and creates no task once the program exists.) Each of n goroutines
// locks itself to its thread and waits: a thread whose locked goroutine
// waits runs nothing else, so the runtime starts another for the next
// one. Unlocked again, the threads stay idle in the runtime for reuse (a
// thread exits only with a goroutine that ends while locked to it).
func warmThreads(n int) {
	ready := make(chan struct{}, n)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			ready <- struct{}{}
			<-release
			runtime.UnlockOSThread()
		}()
	}
	for range n {
		<-ready
	}
	close(release)
	wg.Wait()
}

// warmThreadsAsync starts warmThreads(n) and returns a function that
// waits for it. A stage starts it as soon as it knows it will go on and
// waits only before it forks the next stage: the eight thread creations
// are a chain of hand-offs (each needs the previous goroutine parked on
// its locked thread), about 0.7 ms in stage 0 when run alone, and run
// beside the stage's own work on the other CPU here.
// The threads exist before any further process does, as before: the
// guarantee warmThreads gives is the same.
func warmThreadsAsync(n int) (wait func()) {
	done := make(chan struct{})
	go func() {
		warmThreads(n)
		close(done)
	}()
	return func() { <-done }
}

// threads is the process's thread count (its task directory's entries),
// or 0 if it cannot be read.
func threads() int {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	return len(ents)
}
