module github.com/kassahq/kassa

go 1.26.0

require (
	github.com/google/uuid v1.6.0
	github.com/shopspring/decimal v1.6.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/julienschmidt/httprouter v1.3.0 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
