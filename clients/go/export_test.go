package queuebox

// AbandonedCalls is how many native connects and migrations NewWorker and Migrate stopped
// waiting for (their ctx ended) that have not ended yet: 0 once each was cleaned up.
func AbandonedCalls() int64 { return abandoned.Load() }
