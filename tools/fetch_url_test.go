package tools

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func fetchServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><html><head><title>Fish &amp; Chips</title>
<style>body{color:red}</style><script>alert("x")</script></head>
<body><h1>Menu</h1><p>Cod&nbsp;and   <b>chips</b></p><!-- hidden --><ul><li>one</li><li>two</li></ul></body></html>`))
	})
	mux.HandleFunc("/data.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(strings.Repeat("a", fetchMaxBody+10)))
	})
	mux.HandleFunc("/bin", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write([]byte{0, 1, 2})
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/data.json", http.StatusFound)
	})
	srv := httptest.NewServer(mux) // listens on 127.0.0.1 only
	t.Cleanup(srv.Close)
	return srv
}

func TestFetchURL(t *testing.T) {
	t.Parallel()
	srv := fetchServer(t)
	r := builtinRegistry(t, BuiltinConfig{AllowFetch: true, FetchAllowPrivate: true})

	res := mustOK(t, call(t, r, FetchURLName, map[string]any{"url": srv.URL + "/page"}))
	body := res.Text[strings.Index(res.Text, "\n\n")+2:]
	if want := "# Fish & Chips\n\nMenu\n\nCod and chips\n\none\n\ntwo"; body != want {
		t.Errorf("html text:\n%q\nwant\n%q", body, want)
	}
	if !strings.Contains(res.Text, "Status: 200 OK") || !strings.Contains(res.Text, "Content-Type: text/html") {
		t.Errorf("header: %q", res.Text)
	}
	res = mustOK(t, call(t, r, FetchURLName, map[string]any{"url": srv.URL + "/page", "raw": true}))
	if !strings.Contains(res.Text, "<script>") {
		t.Errorf("raw should keep markup: %q", res.Text)
	}
	res = mustOK(t, call(t, r, FetchURLName, map[string]any{"url": srv.URL + "/redirect"}))
	if !strings.HasPrefix(res.Text, srv.URL+"/data.json\n") || !strings.HasSuffix(res.Text, `{"ok":true}`) {
		t.Errorf("redirect: %q", res.Text)
	}
	res = mustOK(t, call(t, r, FetchURLName, map[string]any{"url": srv.URL + "/big"}))
	if !res.Truncated || !strings.Contains(res.Text, "[output truncated:") || len(res.Text) > fetchMaxText+500 {
		t.Errorf("big: truncated=%v len=%d", res.Truncated, len(res.Text))
	}
	mustFail(t, call(t, r, FetchURLName, map[string]any{"url": srv.URL + "/missing"}), "404")
	mustFail(t, call(t, r, FetchURLName, map[string]any{"url": srv.URL + "/bin"}), "application/octet-stream", "not text")
	mustFail(t, call(t, r, FetchURLName, map[string]any{"url": "file:///etc/passwd"}), "http://")
	impatient := builtinRegistry(t, BuiltinConfig{AllowFetch: true, FetchAllowPrivate: true, FetchTimeout: 300 * time.Millisecond})
	// /slow answers 200 after 5 s, so the error itself shows that the 300 ms deadline cut the fetch.
	mustFail(t, call(t, impatient, FetchURLName, map[string]any{"url": srv.URL + "/slow"}), "Timeout")
}

func TestFetchURLRefusesPrivateByDefault(t *testing.T) {
	t.Parallel()
	srv := fetchServer(t)
	r := builtinRegistry(t, BuiltinConfig{AllowFetch: true})
	mustFail(t, call(t, r, FetchURLName, map[string]any{"url": srv.URL + "/data.json"}), "refused", "loopback")
	localhost := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	mustFail(t, call(t, r, FetchURLName, map[string]any{"url": localhost + "/data.json"}), "refused")
}

// Addresses that embed a loopback IPv4 address must be refused before connect, whatever form carries it.
func TestFetchURLRefusesEmbeddedIPv4(t *testing.T) {
	t.Parallel()
	r := builtinRegistry(t, BuiltinConfig{AllowFetch: true, FetchTimeout: 2 * time.Second})
	for _, host := range []string{"[64:ff9b::7f00:1]", "[2002:7f00:1::1]", "[::127.0.0.1]", "[::ffff:127.0.0.1]",
		"[2001:0:7f00:1::f7f7:fbfb]", "[64:ff9b::a9fe:a9fe]"} {
		mustFail(t, call(t, r, FetchURLName, map[string]any{"url": "http://" + host + ":9/"}), "refused", errPrivateAddr.Error())
	}
}

func TestBlockedIP(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1": true, "::1": true, "10.1.2.3": true, "172.16.0.1": true, "192.168.1.1": true,
		"169.254.169.254": true, "100.64.0.1": true, "100.127.255.254": true, "0.0.0.0": true, "0.1.2.3": true,
		"fe80::1": true, "fd00::1": true, "224.0.0.1": true, "::ffff:10.0.0.1": true,
		"100.63.255.255": false, "100.128.0.1": false, "8.8.8.8": false, "2001:4860:4860::8888": false,
		// IPv4-mapped: judged by the IPv4 address.
		"::ffff:127.0.0.1": true, "::ffff:169.254.169.254": true, "::ffff:8.8.8.8": false,
		// IPv4-compatible (deprecated): refused whole.
		"::127.0.0.1": true, "::10.0.0.1": true, "::8.8.8.8": true,
		// NAT64, well-known prefix: judged by the embedded address; the local-use prefix is refused whole.
		"64:ff9b::127.0.0.1": true, "64:ff9b::a9fe:a9fe": true, "64:ff9b::10.1.2.3": true, "64:ff9b::8.8.8.8": false,
		"64:ff9b:1::8.8.8.8": true,
		// 6to4: the IPv4 address is bytes 2-5.
		"2002:7f00:0001::1": true, "2002:a9fe:a9fe::1": true, "2002:c0a8:0101::": true, "2002:0808:0808::1": false,
		// Teredo: server in bytes 4-7, client inverted in 12-15 (here 10.0.0.1, then 8.8.4.4, both with a public server).
		"2001:0:0808:0808:0:0:f5ff:fffe": true, "2001:0:0808:0808:0:0:f7f7:fbfb": false, "2001:0:7f00:1::f7f7:fbfb": true,
		// Other reserved ranges.
		"198.18.0.1": true, "192.0.2.1": true, "240.0.0.1": true, "255.255.255.255": true, "2001:db8::1": true,
		"fec0::1": true, "100::1": true,
	} {
		if got := blockedIP(net.ParseIP(addr)); got != want {
			t.Errorf("blockedIP(%s) = %v, want %v", addr, got, want)
		}
	}
}
