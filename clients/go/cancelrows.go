package queuebox

/*
#include <stdlib.h>
#include "queuebox.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"unsafe"
)

// InboxTarget names pull inbox rows to cancel: one row by ID, or within Source the row of
// an idempotency Key, or every pending row of an Aggregate. Give exactly one of ID, Key and
// Aggregate; Source is required with Key or Aggregate. An empty field counts as not given.
type InboxTarget struct {
	ID        string `json:"id,omitempty"`
	Source    string `json:"source,omitempty"`
	Key       string `json:"key,omitempty"`
	Aggregate string `json:"aggregate,omitempty"`
}

// OutboxTarget names outbox rows to cancel: one row by ID, or every pending row of a Key
// (the outbox's ordering key), optionally only those of Topic. Give exactly one of ID and
// Key.
type OutboxTarget struct {
	ID    string `json:"id,omitempty"`
	Topic string `json:"topic,omitempty"`
	Key   string `json:"key,omitempty"`
}

// CancelCounts is what a cancel did with the rows it named; a target that matched no row
// gives all zeros.
type CancelCounts struct {
	// Cancelled rows were pending (or scheduled, or waiting for a retry) and are now
	// "cancelled": no worker or relay will take them.
	Cancelled uint64 `json:"cancelled"`
	// InFlight rows were being handled: left to finish or fail normally.
	InFlight uint64 `json:"inFlight"`
	// Finished rows were already terminal (processed/sent, dead, or cancelled before).
	Finished uint64 `json:"finished"`
	// Push rows are inbox rows the relay forwards; they are never cancelled.
	Push uint64 `json:"push"`
}

// CancelInbox cancels the pending pull rows target names (what `queuebox cancel inbox`
// does), in one statement of the core: a row being handled is counted InFlight and left to
// finish, and no row is cancelled twice. A target that names no row fails with
// ErrInvalidInput naming the missing field, before connecting. It connects to databaseURL
// for this call only.
//
// ctx bounds the waiting: once ctx is done, CancelInbox returns an error matching
// ErrCancelled and ctx's own error (context.Canceled or context.DeadlineExceeded), but a cancel already sent to the database may still take effect (read the
// rows' state to know).
func CancelInbox(ctx context.Context, databaseURL string, target InboxTarget) (CancelCounts, error) {
	return cancelRows(ctx, databaseURL, "inbox", target)
}

// CancelOutbox cancels the pending outbox rows target names (what `queuebox cancel outbox`
// does); otherwise as CancelInbox.
func CancelOutbox(ctx context.Context, databaseURL string, target OutboxTarget) (CancelCounts, error) {
	return cancelRows(ctx, databaseURL, "outbox", target)
}

func cancelRows(ctx context.Context, databaseURL, table string, target any) (CancelCounts, error) {
	var counts CancelCounts
	js, err := json.Marshal(target)
	if err != nil {
		return counts, err
	}
	if err := ctx.Err(); err != nil {
		return counts, waitCancelled("cancel "+table, err)
	}
	type result struct {
		counts string
		err    error
	}
	// The native call cannot be interrupted, so it runs on a goroutine of its own that frees
	// its runtime when it ends, whether or not anyone still waits for it.
	done := make(chan result, 1)
	go func() {
		out, err := nativeCancel(databaseURL, table, string(js))
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return counts, r.err
		}
		if err := json.Unmarshal([]byte(r.counts), &counts); err != nil {
			return counts, &Error{Kind: KindInternal, Message: "cancel counts: " + err.Error()}
		}
		return counts, nil
	case <-ctx.Done():
		return counts, waitCancelled("cancel "+table, ctx.Err())
	}
}

// nativeCancel is qb_cancel_blocking on a runtime of its own (one thread), freed after.
func nativeCancel(url, table, targetJSON string) (string, error) {
	rt, err := newRuntime(1)
	if err != nil {
		return "", err
	}
	defer rt.free()
	curl, ctable, ctarget := cstr(url), cstr(table), cstr(targetJSON)
	defer C.free(unsafe.Pointer(curl))
	defer C.free(unsafe.Pointer(ctable))
	defer C.free(unsafe.Pointer(ctarget))
	var out *C.char
	var e *C.QbError
	err = check(C.qb_cancel_blocking(rt.p, curl, ctable, ctarget, &out, &e), e)
	return takeString(out), err
}
