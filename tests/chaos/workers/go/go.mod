module queuebox-chaos-worker-go

go 1.24

require github.com/alternayte/queuebox/clients/go v0.0.0

replace github.com/alternayte/queuebox/clients/go => ../../../../clients/go
