package tools

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"time"
)

//go:embed fetch_url.md
var fetchURLDescription string

const (
	fetchMaxBody     = 2 << 20  // bytes read from the wire
	fetchMaxText     = 48 << 10 // bytes of text handed to the model
	fetchDefaultTime = 20 * time.Second
)

type fetchURLIn struct {
	URL string `json:"url" jsonschema_description:"Absolute http or https URL."`
	Raw bool   `json:"raw,omitempty" jsonschema:"default=false" jsonschema_description:"Return the body as is instead of extracting text from HTML."`
}

// errPrivateAddr is returned when fetch_url would connect to a non-public address.
var errPrivateAddr = errors.New("address is loopback, private or link-local")

func fetchURLTool(cfg BuiltinConfig) Tool {
	timeout := cfg.FetchTimeout
	if timeout <= 0 {
		timeout = fetchDefaultTime
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	if !cfg.FetchAllowPrivate {
		// Checking the address at dial time, after DNS, also defeats names that resolve to private IPs.
		dialer.Control = func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			if blockedIP(net.ParseIP(host)) {
				return fmt.Errorf("%s: %w", host, errPrivateAddr)
			}
			return nil
		}
	}
	client := &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:         dialer.DialContext,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConns:        4,
			IdleConnTimeout:     30 * time.Second,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("stopped after 5 redirects")
			}
			return nil
		},
	}
	return New(FetchURLName, describe(fetchURLDescription), func(ctx context.Context, in fetchURLIn) (Result, error) {
		return fetchURL(ctx, client, in)
	}, Parallel(), WithTimeout(timeout+5*time.Second))
}

func fetchURL(ctx context.Context, client *http.Client, in fetchURLIn) (Result, error) {
	u, err := url.Parse(strings.TrimSpace(in.URL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Result{}, fmt.Errorf("url %q must be an absolute http:// or https:// URL", in.URL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Result{}, fmt.Errorf("fetch %s: %w", u, err)
	}
	req.Header.Set("User-Agent", "visor-fetch/1 (+https://github.com/visorhq/visor)")
	req.Header.Set("Accept", "text/html, text/plain, text/markdown, application/json, application/xml;q=0.9, */*;q=0.1")
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, errPrivateAddr) {
			return Result{}, fmt.Errorf("fetch %s refused: the %w, and fetching it is not allowed", u, errPrivateAddr)
		}
		return Result{}, fmt.Errorf("fetch %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, fetchMaxBody+1))
	if err != nil {
		return Result{}, fmt.Errorf("fetch %s: reading body: %w", u, err)
	}
	cut := len(body) > fetchMaxBody
	if cut {
		body = body[:fetchMaxBody]
	}
	ctype := resp.Header.Get("Content-Type")
	if ctype == "" {
		ctype = http.DetectContentType(body)
	}
	mt, _, _ := mime.ParseMediaType(ctype)
	if !isTextType(mt) {
		return Result{}, fmt.Errorf("fetch %s: response is %s, not text", u, mt)
	}
	text := string(body)
	if !in.Raw && (mt == "text/html" || mt == "application/xhtml+xml") {
		text = htmlToText(text)
	}
	res := Result{IsError: resp.StatusCode >= 400}
	header := fmt.Sprintf("%s\nStatus: %s\nContent-Type: %s\n\n", resp.Request.URL, resp.Status, mt)
	if len(text) > fetchMaxText || cut {
		res.Truncated = true
		text = Truncate(text, fetchMaxText)
		if cut {
			text += fmt.Sprintf("\n[body was larger than %d bytes; only the start was read]", fetchMaxBody)
		}
	}
	res.Text = header + text
	return res, nil
}

func isTextType(mt string) bool {
	switch {
	case strings.HasPrefix(mt, "text/"):
		return true
	case mt == "application/json", mt == "application/xml", mt == "application/xhtml+xml",
		strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"), mt == "application/javascript":
		return true
	}
	return false
}

var (
	htmlDrop   = regexp.MustCompile(`(?is)<(script|style|noscript|svg|template|head)\b.*?</(script|style|noscript|svg|template|head)\s*>|<!--.*?-->`)
	htmlTitle  = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title\s*>`)
	htmlBreak  = regexp.MustCompile(`(?i)<br\s*/?>|</?(p|div|li|ul|ol|tr|table|section|article|header|footer|h[1-6]|pre|blockquote)\b[^>]*>`)
	htmlTag    = regexp.MustCompile(`(?s)<[^>]*>`)
	spaceRun   = regexp.MustCompile(`[ \t\f\v\r\x{a0}]+`)
	blankLines = regexp.MustCompile(`\n\s*\n\s*\n+`)
)

// htmlToText is deliberately basic: enough to read an article or a docs page, not a browser.
func htmlToText(s string) string {
	title := ""
	if m := htmlTitle.FindStringSubmatch(s); m != nil {
		title = strings.TrimSpace(html.UnescapeString(htmlTag.ReplaceAllString(m[1], "")))
	}
	s = htmlDrop.ReplaceAllString(s, "")
	s = htmlBreak.ReplaceAllString(s, "\n")
	s = htmlTag.ReplaceAllString(s, "")
	s = html.UnescapeString(s)
	s = spaceRun.ReplaceAllString(s, " ")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	s = blankLines.ReplaceAllString(strings.Join(lines, "\n"), "\n\n")
	s = strings.TrimSpace(s)
	if title != "" {
		s = "# " + title + "\n\n" + s
	}
	return s
}

// blocked4 are the IPv4 ranges a fetch must not reach beyond what net.IP's predicates cover: "this network"
// (0.0.0.0/8, which Linux routes to the local host), carrier-grade NAT (100.64.0.0/10, often a cloud provider's
// internal network), IETF protocol assignments, the documentation and benchmarking nets, and the reserved
// 240.0.0.0/4 with the broadcast address.
var blocked4 = prefixes("0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
	"198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4")

// blocked6 are IPv6 ranges refused whole: IPv4-compatible addresses (::a.b.c.d, deprecated, and routed to the
// IPv4 address by some stacks), local-use NAT64 (64:ff9b:1::/48, a site's own translator), discard-only,
// documentation, benchmarking, ORCHID and the deprecated site-local fec0::/10.
var blocked6 = prefixes("::/96", "64:ff9b:1::/48", "100::/64", "2001:db8::/32", "2001:2::/48", "2001:10::/28",
	"2001:20::/28", "fec0::/10")

var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96") // well-known NAT64: the IPv4 address is the last 4 bytes
	sixTo4 = netip.MustParsePrefix("2002::/16")    // 6to4: the IPv4 address is bytes 2-5
	teredo = netip.MustParsePrefix("2001::/32")    // Teredo: server at bytes 4-7, client inverted in 12-15
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// blockedIP reports addresses a fetch must not reach unless private fetches are allowed: anything that is not a
// public unicast address, so a page the model read cannot steer it at llama-server or a metadata endpoint. An
// IPv6 address that carries an IPv4 one (IPv4-mapped, NAT64, 6to4, Teredo) is judged by the IPv4 address too,
// since the network delivers it there.
func blockedIP(ip net.IP) bool {
	a, ok := netip.AddrFromSlice(ip)
	return !ok || blockedAddr(a)
}

func blockedAddr(a netip.Addr) bool {
	a = a.Unmap() // ::ffff:a.b.c.d is a.b.c.d
	if !a.IsGlobalUnicast() || a.IsPrivate() {
		return true // loopback, unspecified, link-local, multicast, 10/8, fc00::/7 and the like
	}
	if a.Is4() {
		for _, p := range blocked4 {
			if p.Contains(a) {
				return true
			}
		}
		return a == netip.AddrFrom4([4]byte{255, 255, 255, 255})
	}
	for _, p := range blocked6 {
		if p.Contains(a) {
			return true
		}
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return blockedAddr(netip.AddrFrom4([4]byte(b[12:16])))
	case sixTo4.Contains(a):
		return blockedAddr(netip.AddrFrom4([4]byte(b[2:6])))
	case teredo.Contains(a):
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		return blockedAddr(netip.AddrFrom4([4]byte(b[4:8]))) || blockedAddr(netip.AddrFrom4(client))
	}
	return false
}
