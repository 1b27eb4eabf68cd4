package throttletest_test

import (
	"fmt"
	"net/http"

	"github.com/throttlehttp/throttle/throttletest"
)

// A token bucket of two requests, refilled once a minute: the third request in a
// row is refused and told to come back when the next token is due.
func Example() {
	api := throttletest.NewAPI(throttletest.Config{
		Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 1.0 / 60, Burst: 2}},
	})
	client := &http.Client{Transport: api} // in-process; NewServer gives a real socket

	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, "http://api.example/items", nil)
		req.Header.Set("X-API-Key", "team-a")
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		if wait := resp.Header.Get("Retry-After"); wait != "" {
			fmt.Printf("%d, retry after %ss\n", resp.StatusCode, wait)
		} else {
			fmt.Println(resp.StatusCode)
		}
	}
	s := api.Stats().Keys["team-a"]
	fmt.Printf("accepted %d, throttled %d\n", s.Accepted, s.Throttled)
	// Output:
	// 200
	// 200
	// 429, retry after 60s
	// accepted 2, throttled 1
}
