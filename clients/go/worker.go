package queuebox

/*
#include "queuebox.h"
*/
import "C"

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Handler processes one message. Return nil to complete the row (together with the
// writes made through tx), Retry(after) or Dead(reason) to decide yourself, or any other
// error to let the retry policy decide. ctx is cancelled when the row's lease is lost or
// the shutdown grace ran out; the row is then abandoned (nothing is written) whatever the
// handler returns. A handler must return (not end its goroutine with runtime.Goexit, as
// t.FailNow does): the goroutine that runs it runs the next ones too.
type Handler func(ctx context.Context, msg *Message, tx *Tx) error

// Stats are a worker's counters.
type Stats struct {
	Claimed, Completed, Retried, Dead, Released, ClaimsLost, ClaimErrors, InFlight uint64
}

// Worker claims pull rows of one source and runs a handler on each. The protocol (claim,
// lease renewal, LISTEN/NOTIFY, backoff, fencing, completion) runs in the native library.
type Worker struct {
	rt      *nativeRuntime
	w       *C.QbWorker
	mu      sync.Mutex
	running bool
	closed  bool
	done    chan struct{}
	// slots is Options.Concurrency (at least 1): how many handler goroutines Run keeps.
	slots int
	// unlog stops routing this worker's log records to Options.Logger.
	unlog func()
	// source and tracer: the handler spans' name and Options.TracerProvider (otel.go).
	source string
	tracer trace.TracerProvider
}

// NewWorker validates opts and connects to the PostgreSQL database at databaseURL (whose
// QueueBox schema must be migrated; see Migrate). It returns once connected, or as soon as
// ctx is done: the error then matches errors.Is(err, ErrCancelled) and ctx's own error
// (context.Canceled or context.DeadlineExceeded), and a connection still being made is
// closed when it completes. ctx only bounds the connecting; Run takes the worker's own.
func NewWorker(ctx context.Context, databaseURL string, opts Options) (*Worker, error) {
	js, err := opts.optionsJSON()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, waitCancelled("connecting", err)
	}
	rt, err := newRuntime(0)
	if err != nil {
		return nil, err
	}
	unlog := registerLogger(opts.Source, opts.Logger)
	type connected struct {
		w   *C.QbWorker
		err error
	}
	// The native call cannot be interrupted (the C ABI has no cancel for it), so it runs on
	// a goroutine of its own; whoever stops waiting first owns the cleanup.
	done := make(chan connected, 1)
	go func() {
		w, err := nativeWorkerNew(rt, databaseURL, js)
		done <- connected{w, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			rt.free()
			unlog()
			return nil, r.err
		}
		return &Worker{rt: rt, w: r.w, unlog: unlog, slots: max(opts.Concurrency, 1), source: opts.Source, tracer: opts.TracerProvider}, nil
	case <-ctx.Done():
		abandoned.Add(1)
		go func() {
			defer abandoned.Add(-1)
			if r := <-done; r.err == nil {
				workerFree(r.w) // stops its schedules too: nobody asked for this worker any more
			}
			rt.free()
			unlog()
		}()
		return nil, waitCancelled("connecting", ctx.Err())
	}
}

// abandoned counts native calls that NewWorker or Migrate stopped waiting for and that have
// not ended yet (their runtime is freed when they do); tests read it through export_test.go.
var abandoned atomic.Int64

// waitCancelled is the error of a call whose ctx ended while it waited on the network.
func waitCancelled(what string, cause error) error {
	return &Error{Kind: KindCancelled, Message: what + ": " + cause.Error(), cause: cause}
}

// Run claims rows and runs handler on them until ctx is cancelled, then shuts down
// gracefully: no new claims, claimed rows that never started are released, running
// handlers get ShutdownGrace, then their ctx is cancelled and their rows abandoned. It
// returns nil after a stop by ctx, or the error that stopped the worker (ErrSchemaMissing).
// A Worker runs once.
func (w *Worker) Run(ctx context.Context, handler Handler) error {
	if handler == nil {
		return &Error{Kind: KindInvalidInput, Message: "the handler is mandatory"}
	}
	return w.run(ctx, func(ctx context.Context, task *Task) error {
		return handler(ctx, task.Message, &Tx{task: task.native})
	})
}

// run is Run's loop for every handler form: call gets each claimed task.
func (w *Worker) run(ctx context.Context, call func(ctx context.Context, task *Task) error) error {
	w.mu.Lock()
	if w.closed || w.running || w.done != nil {
		w.mu.Unlock()
		return &Error{Kind: KindInvalidInput, Message: "the worker is closed or already ran"}
	}
	w.running, w.done = true, make(chan struct{})
	w.mu.Unlock()
	// Every handler form in a span of the application's tracer, when it set one.
	call = traced(tracerProvider(w.tracer), w.source, call)
	defer func() {
		w.mu.Lock()
		w.running = false
		close(w.done)
		w.mu.Unlock()
	}()

	stopped := make(chan struct{})
	shutdownDone := make(chan struct{})
	var shutdownOnce sync.Once
	shutdown := func() {
		shutdownOnce.Do(func() {
			go func() {
				_, _ = nativeShutdown(w.w)
				close(shutdownDone)
			}()
		})
	}
	go func() {
		select {
		case <-ctx.Done():
			shutdown()
		case <-stopped:
		}
	}()

	// One crossing hands out a batch of tasks: whatever the core has claimed, up to its
	// whole batch (the worker is a hand-out worker, options.go). They wait in jobs for one
	// of Concurrency handler goroutines (a fixed set: no goroutine, and no stack growth, per
	// task); plain completions go back in batches through the completer (batch.go), with the
	// handlers' times, which size what the core claims ahead of them.
	var handlers sync.WaitGroup
	var failure error
	gate := newSlotGate(w.slots)
	done := &completer{gate: gate, worker: w.w}
	jobs := make(chan job, handOutQueue)
	// Set once the loop ended (shutdown): tasks still queued are released, not run.
	var stopping atomic.Bool
	handlers.Add(w.slots)
	for i := 0; i < w.slots; i++ {
		go func() {
			defer handlers.Done()
			for j := range jobs {
				if stopping.Load() {
					releaseUnstarted(j.task, gate)
					continue
				}
				// The time a task holds its handler goroutine, the wrapper's own work on it
				// included (as the Rust worker's handler time includes its task's): what
				// the core sizes its claims by (completer.report).
				started := time.Now()
				runOne(j.task, j.msg, call, done)
				done.ran(time.Since(started))
			}
		}()
	}
	for {
		gate.wait(ctx, func() int { return len(jobs) })
		tasks, msgs, err := nativeNextBatch(w.w, maxBatch)
		if err != nil {
			failure = err
			break
		}
		gate.took(len(tasks))
		if len(tasks) == 0 {
			break
		}
		for i := range tasks {
			// Blocks only when handOutQueue tasks wait already (a batch above it).
			jobs <- job{tasks[i], msgs[i]}
		}
	}
	// Stopped: the tasks still queued go back at once, here as well as in any handler
	// goroutine that comes free (all of them may be busy for the whole grace).
	stopping.Store(true)
	close(jobs)
	for j := range jobs {
		releaseUnstarted(j.task, gate)
	}
	close(stopped)
	shutdown()
	handlers.Wait() // a handler that sends completions returns once they are all sent
	<-shutdownDone
	return failure
}

// releaseUnstarted gives back a task that waited in the queue when the run stopped: pending
// again at once, no attempt spent (as the core does with rows it claimed and never handed
// out).
func releaseUnstarted(task *C.QbTask, gate *slotGate) {
	_ = taskRelease(task)
	taskFree(task)
	gate.release(1)
}

// job is a task handed to a handler goroutine, with its message.
type job struct {
	task *C.QbTask
	msg  *Message
}

// runOne runs the handler on one task and finishes the task by its result: a success goes
// to the completer (which frees the task), every other outcome is finished and freed here.
func runOne(task *C.QbTask, msg *Message, call func(ctx context.Context, task *Task) error, done *completer) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	unwatch := watchCancelled(task, cancel)

	t := &Task{Message: msg, native: task}
	herr := callHandler(ctx, call, t)
	// Stop watching before the task can be freed below or by the completer.
	unwatch()
	t.returned.Store(true) // the task is finished and freed below: CompleteTx refuses it from now on
	// A cancelled task is abandoned by the library whatever is asked here (QB_CANCELLED).
	if herr == nil && !t.lost.Load() {
		done.add(task)
		return
	}
	defer done.gate.release(1) // deferred first, so it runs after taskFree
	defer taskFree(task)
	done.report()
	switch {
	case t.lost.Load():
		// CompleteTx found the claim lost (and told the core): the row has a new owner.
		_ = taskAbandon(task)
	default:
		if r, ok := asRetry(herr); ok {
			_ = taskRetry(task, uint64(r.After.Milliseconds()), r.Reason)
		} else if d, ok := asDead(herr); ok {
			_ = taskDead(task, d.Reason)
		} else {
			_ = taskFail(task, herr.Error())
		}
	}
}

func callHandler(ctx context.Context, call func(context.Context, *Task) error, task *Task) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return call(ctx, task)
}

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return Stats{}
	}
	return nativeStats(w.w)
}

// Close releases the worker. A running Run is stopped first (as if its ctx were
// cancelled) and Close waits for it.
func (w *Worker) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	done, running := w.done, w.running
	w.mu.Unlock()
	if running {
		_, _ = nativeShutdown(w.w)
		<-done
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	workerFree(w.w)
	w.rt.free()
	w.w, w.rt = nil, nil
	w.unlog()
	return nil
}

// Migrate applies the QueueBox PostgreSQL migrations (what `queuebox migrate` does). It
// returns as soon as ctx is done (an error matching ErrCancelled and ctx's error), but a
// migration already under way runs on to its end: the C ABI cannot stop it, and each
// migration commits whole or is resumed by the next run.
func Migrate(ctx context.Context, databaseURL string) error {
	if err := ctx.Err(); err != nil {
		return waitCancelled("migrating", err)
	}
	rt, err := newRuntime(1)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		_, err := nativeMigrate(rt, databaseURL)
		done <- err
	}()
	select {
	case err := <-done:
		rt.free()
		return err
	case <-ctx.Done():
		abandoned.Add(1)
		go func() {
			defer abandoned.Add(-1)
			<-done
			rt.free()
		}()
		return waitCancelled("migrating", ctx.Err())
	}
}

// EvaluateVector runs one conformance vector case (proto-docs/vectors) through the core
// and returns its output as JSON.
func EvaluateVector(kind string, inputJSON []byte) ([]byte, error) {
	out, err := conformanceEvaluate(kind, string(inputJSON))
	if err != nil {
		return nil, err
	}
	return []byte(out), nil
}

// Version of the native library.
func Version() string { return libraryVersion() }

func stringReader(s string) *strings.Reader { return strings.NewReader(s) }
