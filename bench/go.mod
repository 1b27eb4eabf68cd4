module github.com/throttlehttp/throttle/bench

go 1.26.0

require (
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/throttlehttp/throttle v0.0.0
	golang.org/x/time v0.16.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
)

replace github.com/throttlehttp/throttle => ../
