module github.com/alternayte/queuebox/benchmarks/ffi_go

go 1.24

require github.com/alternayte/queuebox/clients/go v0.0.0

replace github.com/alternayte/queuebox/clients/go => ../../clients/go
