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

*/
import "C"

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// The boundary is crossed per batch, not per row: the worker loop takes tasks
// with one qb_worker_next_batch_blocking call, handlers run on goroutines, plain
// completions go back with one non-waiting qb_tasks_complete call for those that finished
// together (the core batches the statements), and cancellation reaches
// Go through a callback instead of a blocked OS thread per task.

// maxBatch bounds the tasks one next_batch crossing takes (the default batch is at most 1024
// up to concurrency 512); the core hands out no more than it holds.
const maxBatch = 1024

// handOutQueue is how many handed-out tasks Run's queue holds before its loop waits for the
// handlers to take some (only a batch above it fills it).
const handOutQueue = 2 * maxBatch

// nativeNextBatch waits for at least one task and returns up to max tasks the core could
// hand out at once with their messages; empty once the worker is stopping. The messages
// cross as C structs of strings (qb_worker_next_messages_blocking) and are copied into Go
// values here, field by field: no JSON to decode. The tasks are the caller's to finish and
// free; the batch itself is freed here.
func nativeNextBatch(w *C.QbWorker, max int) ([]*C.QbTask, []*Message, error) {
	var b *C.QbMessageBatch
	var e *C.QbError
	if err := check(C.qb_worker_next_messages_blocking(w, C.size_t(min(max, maxBatch)), &b, &e), e); err != nil {
		return nil, nil, err
	}
	defer C.qb_message_batch_free(b)
	n := int(b.len)
	if n == 0 {
		return nil, nil, nil
	}
	// The batch's arrays are read in place (unsafe.Slice over C memory, valid until the
	// free above): no cgo call per element.
	tasks := append([]*C.QbTask(nil), unsafe.Slice(b.tasks, n)...)
	cmsgs := unsafe.Slice(b.messages, n)
	msgs := make([]*Message, n)
	for i := range cmsgs {
		msgs[i] = messageFromC(&cmsgs[i])
	}
	return tasks, msgs, nil
}

// goString copies a library string; goOptString is nil for an absent one (NULL ptr).
func goString(s C.QbStr) string { return C.GoStringN(s.ptr, C.int(s.len)) }

func goOptString(s C.QbStr) *string {
	if s.ptr == nil {
		return nil
	}
	v := goString(s)
	return &v
}

// messageFromC copies one message out of its batch.
func messageFromC(m *C.QbMessage) *Message {
	msg := &Message{
		ID:             goString(m.id),
		Source:         goString(m.source),
		IdempotencyKey: goString(m.idempotency_key),
		AggregateID:    goOptString(m.aggregate_id),
		EventType:      goOptString(m.event_type),
		Payload:        C.GoBytes(unsafe.Pointer(m.payload_json.ptr), C.int(m.payload_json.len)),
		Headers:        make(map[string]string, int(m.headers_len)),
		Attempt:        int(m.attempt),
		CorrelationID:  goOptString(m.correlation_id),
		CreatedAt:      time.Unix(0, int64(m.created_at_unix_nanos)).UTC(),
	}
	if m.headers_len > 0 {
		for _, h := range unsafe.Slice(m.headers, int(m.headers_len)) {
			msg.Headers[goString(h.name)] = goString(h.value)
		}
	}
	if m.traceparent.ptr != nil {
		msg.Trace = &TraceContext{Traceparent: goString(m.traceparent), Tracestate: goOptString(m.tracestate)}
	}
	return msg
}

// tasksComplete hands every task of the batch to the core's completion with one crossing
// that does not wait for the statement (qb_tasks_complete without a callback): each
// task's concurrency slot is free once the call returned, so the next task starts at once
// while the core's completer runs the statement, batching what arrives meanwhile, as for
// the Rust worker. Each task keeps its own fence (a lost claim is counted and logged by
// the core, as for a single completion). The handles may be freed when it returned.
func tasksComplete(tasks []*C.QbTask) {
	if len(tasks) == 0 {
		return
	}
	// The slice's backing array is Go memory holding C pointers only, which cgo allows
	// passing for the duration of the call (the library copies what it needs before it
	// returns).
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

// watchDelay is how long a handler runs before its cancellation is watched. Most
// handlers finish sooner, and then no watcher and no callback exist at all (a callback
// from a library thread into Go costs more than a short handler). A cancellation that
// happened earlier is still delivered at once when the watch starts: the library fires
// the callback immediately for a task already cancelled. Leases are at least 300 ms, so
// the delay only postpones a rare signal by a few milliseconds.
const watchDelay = 5 * time.Millisecond

// watchCancelled arranges for cancel to run when the task is cancelled, starting after
// watchDelay; the returned func stops watching and must be called before the task can be
// freed (after it, the watch is never registered on the handle).
func watchCancelled(t *C.QbTask, cancel context.CancelFunc) func() {
	var mu sync.Mutex
	done := false
	key := uint64(0)
	timer := time.AfterFunc(watchDelay, func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		key = cancelKey.Add(1)
		cancelFuncs.Store(key, cancel)
		var e *C.QbError
		if err := check(C.qb_go_watch_cancelled(t, C.uintptr_t(key), &e), e); err != nil {
			// Only a NULL task is refused; nothing will ever call back.
			cancelFuncs.Delete(key)
		}
	})
	return func() {
		timer.Stop()
		mu.Lock()
		done = true
		if key != 0 {
			cancelFuncs.Delete(key)
		}
		mu.Unlock()
	}
}

// taskCancelled is the Go side of queueboxGoTaskCancelled.
func taskCancelled(key uint64, cancelled bool) {
	f, ok := cancelFuncs.LoadAndDelete(key)
	if ok && cancelled {
		f.(context.CancelFunc)()
	}
}

// completer sends plain completions back in batches without a goroutine of its own: the
// handler goroutine that finds no hand-over under way hands over everything queued (and
// what queues meanwhile) and frees those tasks; the others only queue theirs. The
// hand-over never waits for the statement (tasksComplete): a completion queued here still
// holds its concurrency slot, so waiting for the statement here would hold the next row
// back behind it (at concurrency 1 every statement then carried one row, 1.1
// transactions per row against the Rust worker's 0.5, and the Go worker fell to 0.62x).
type completer struct {
	mu       sync.Mutex
	queue    []*C.QbTask
	flushing bool
	// gate is told of the slots each hand-over freed.
	gate *slotGate
	// worker takes the handlers' times (report); ranN and ranNanos count those not yet
	// reported.
	worker   *C.QbWorker
	ranN     atomic.Int64
	ranNanos atomic.Int64
}

// ran counts one handler's run (any outcome) for the next report.
func (c *completer) ran(d time.Duration) {
	c.ranNanos.Add(int64(d))
	c.ranN.Add(1)
}

// report passes the runs counted so far to the core (qb_worker_handlers_took), which sizes
// what it claims ahead of the handlers by their time: they run here, out of its sight. Sent
// with each hand-over of completions and with each failure. A run counted between the two
// swaps below lands its time in this report and its count in the next: a skew of one run.
func (c *completer) report() {
	n := c.ranN.Swap(0)
	if n == 0 {
		return
	}
	nativeHandlersTook(c.worker, n, time.Duration(c.ranNanos.Swap(0)))
}

// add hands over a task whose handler succeeded; the completer frees it.
func (c *completer) add(t *C.QbTask) {
	c.mu.Lock()
	c.queue = append(c.queue, t)
	if c.flushing {
		c.mu.Unlock()
		return
	}
	c.flushing = true
	for len(c.queue) > 0 {
		batch := c.queue
		c.queue = nil
		c.mu.Unlock()
		c.report()
		tasksComplete(batch)
		for _, t := range batch {
			taskFree(t)
		}
		c.gate.release(len(batch))
		c.mu.Lock()
	}
	c.flushing = false
	c.mu.Unlock()
}

// slotGate keeps Run's loop from asking the core for tasks while every handler is busy and
// no task waits in the queue: a worker whose handlers are stuck must not take rows it cannot
// start (they would wait behind the stuck ones while other workers could run them). While
// tasks wait, the loop asks at once, so the core claims the next rows while these run; with
// a free handler and an empty queue it asks too. A task counts from its hand-out until its
// finish began (the completer's hand-over returned) or it was freed.
type slotGate struct {
	slots int64
	// out is how many tasks the loop took; only the loop reads or writes it.
	out int64
	// finished is how many of them gave their slot back.
	finished atomic.Int64
	// wake holds one token when a slot was given back since the loop last looked.
	wake chan struct{}
}

func newSlotGate(slots int) *slotGate {
	return &slotGate{slots: int64(slots), wake: make(chan struct{}, 1)}
}

// wait returns once the loop may ask for tasks: queued() tasks wait in the queue, or a
// handler is free. Once ctx is done it returns without waiting: the core then hands out
// nothing more (it is shutting down) and the loop ends.
func (g *slotGate) wait(ctx context.Context, queued func() int) {
	for {
		q := int64(queued())
		if q > 0 || g.out-g.finished.Load()-q < g.slots {
			return
		}
		select {
		case <-g.wake:
		case <-ctx.Done():
			return
		}
	}
}

// took records tasks the loop took.
func (g *slotGate) took(n int) { g.out += int64(n) }

// release gives back the slots of n finished tasks.
func (g *slotGate) release(n int) {
	if n == 0 {
		return
	}
	g.finished.Add(int64(n))
	select {
	case g.wake <- struct{}{}:
	default:
	}
}
