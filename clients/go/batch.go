package queuebox

/*
#include <stdint.h>
#include "queuebox.h"

// Declared by cancel_export.go (a file with //export may only declare C functions, so the
// trampoline that hands it to the library lives here).
extern void queueboxGoTaskCancelled(void *user_data, bool cancelled);

// The key travels as user_data: an integer, never a Go pointer.
static QbStatus qb_go_watch_cancelled(const QbTask *task, uintptr_t key, QbError **out_error) {
	return qb_task_on_cancelled(task, queueboxGoTaskCancelled, (void *)key, out_error);
}

static QbTask *qb_go_batch_task(const QbTaskBatch *b, size_t i) { return b->tasks[i]; }
static char *qb_go_batch_message(const QbTaskBatch *b, size_t i) { return b->messages_json[i]; }
*/
import "C"

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The boundary is crossed per batch, not per row (issue 21): the worker loop takes tasks
// with one qb_worker_next_batch_blocking call, handlers run on goroutines, plain
// completions go back with one qb_tasks_complete call per batch, and cancellation reaches
// Go through a callback instead of a blocked OS thread per task.

// maxBatch bounds the tasks one next_batch crossing takes; the core hands out no more than
// its free concurrency slots anyway.
const maxBatch = 256

// nativeNextBatch waits for at least one task and returns every task the core could hand
// out at once with its message JSON; empty once the worker is stopping. The tasks are the
// caller's to finish and free; the batch itself is freed here.
func nativeNextBatch(w *C.QbWorker) ([]*C.QbTask, []string, error) {
	var b *C.QbTaskBatch
	var e *C.QbError
	if err := check(C.qb_worker_next_batch_blocking(w, maxBatch, &b, &e), e); err != nil {
		return nil, nil, err
	}
	defer C.qb_task_batch_free(b)
	n := int(b.len)
	tasks, msgs := make([]*C.QbTask, n), make([]string, n)
	for i := 0; i < n; i++ {
		tasks[i] = C.qb_go_batch_task(b, C.size_t(i))
		msgs[i] = C.GoString(C.qb_go_batch_message(b, C.size_t(i)))
	}
	return tasks, msgs, nil
}

// tasksComplete completes every task of the batch with one crossing, without waiting: the
// core finishes each (its own fence; a lost claim is counted and logged there, as for a
// single completion) and the handles may be freed as soon as this returns.
func tasksComplete(tasks []*C.QbTask) {
	if len(tasks) == 0 {
		return
	}
	// The slice's backing array is Go memory holding C pointers only, which cgo allows
	// passing for the duration of the call (the library copies what it needs).
	var e *C.QbError
	_ = check(C.qb_tasks_complete((**C.QbTask)(unsafe.Pointer(&tasks[0])), C.size_t(len(tasks)), nil, nil, &e), e)
}

// Cancellation: each running handler's cancel func is registered under a fresh key; the
// library calls queueboxGoTaskCancelled once per task (true when the lease was lost or the
// shutdown grace ran out, false when the task settled first). Keys are never reused, so a
// late call for a finished task finds nothing.
var (
	cancelKey   atomic.Uint64
	cancelFuncs sync.Map // uint64 -> context.CancelFunc
)

// watchCancelled arranges for cancel to run when the task is cancelled; the returned func
// stops watching (call it once the handler has returned).
func watchCancelled(t *C.QbTask, cancel context.CancelFunc) func() {
	key := cancelKey.Add(1)
	cancelFuncs.Store(key, cancel)
	var e *C.QbError
	if err := check(C.qb_go_watch_cancelled(t, C.uintptr_t(key), &e), e); err != nil {
		// Only a NULL task is refused; nothing will ever call back.
		cancelFuncs.Delete(key)
	}
	return func() { cancelFuncs.Delete(key) }
}

// taskCancelled is the Go side of queueboxGoTaskCancelled.
func taskCancelled(key uint64, cancelled bool) {
	f, ok := cancelFuncs.LoadAndDelete(key)
	if ok && cancelled {
		f.(context.CancelFunc)()
	}
}

// completer sends plain completions back in batches: handlers that finish while a batch is
// being handed over queue up and go together in the next qb_tasks_complete call. It owns
// the tasks given to it and frees them.
type completer struct {
	ch   chan *C.QbTask
	done chan struct{}
}

func newCompleter() *completer {
	c := &completer{ch: make(chan *C.QbTask, maxBatch), done: make(chan struct{})}
	go c.loop()
	return c
}

// add hands a task whose handler succeeded to the completer.
func (c *completer) add(t *C.QbTask) { c.ch <- t }

// close completes what is queued and waits until every task was handed over and freed.
func (c *completer) close() {
	close(c.ch)
	<-c.done
}

func (c *completer) loop() {
	defer close(c.done)
	batch := make([]*C.QbTask, 0, maxBatch)
	for t := range c.ch {
		batch = append(batch[:0], t)
		// Handlers of one batch finish together: let them queue before taking the batch.
		runtime.Gosched()
	more:
		for len(batch) < maxBatch {
			select {
			case t, ok := <-c.ch:
				if !ok {
					break more
				}
				batch = append(batch, t)
			default:
				break more
			}
		}
		tasksComplete(batch)
		for _, t := range batch {
			taskFree(t)
		}
	}
}
