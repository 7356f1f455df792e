package render

import (
	"cmp"
	"fmt"
	"slices"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// maxRateLimit bounds each limit as translation does.
const maxRateLimit = 1000000

// limitProfile is a policy's model.RateLimit, validated again, with the
// stick tables that count for it.
type limitProfile struct {
	rps, rpm, conns                int
	rpsTable, rpmTable, connsTable encode.Word
}

// A stickTable is a backend holding only a table keyed by client
// address (ipv6 holds IPv4 addresses too). Requests count in gpc0 once
// accepted (sc-inc-gpc0 after the deny rules), so a client over its
// limit still gets its allowance through, as with nginx; connections in
// conn_cur, which a request tracking the entry holds until it ends.
type stickTable struct {
	name  encode.Word
	store encode.Word
	// expire outlives the counting period, so an entry is never dropped
	// while it still counts.
	expire encode.Word
}

// rateLimitProfile validates o and registers its tables, one per limit,
// named after the load balancer and the profile: another Ingress (another
// profile) never shares a count.
func (u *sections) rateLimitProfile(o *model.RateLimit, profileID string) (*limitProfile, error) {
	if o == nil {
		return nil, nil
	}
	for _, n := range []int{o.RequestsPerSecond, o.RequestsPerMinute, o.Connections} {
		if n < 0 || n > maxRateLimit {
			return nil, fmt.Errorf("rate limit %d is outside 0-%d", n, maxRateLimit)
		}
	}
	p := &limitProfile{rps: o.RequestsPerSecond, rpm: o.RequestsPerMinute, conns: o.Connections}
	table := func(suffix encode.Word, store, expire encode.Word) encode.Word {
		name := encode.Concat(encode.ID("st_", u.uuid), encode.Lit("_"), encode.ID("", profileID), suffix)
		u.tables[name.String()] = stickTable{name: name, store: store, expire: expire}
		return name
	}
	if p.rps > 0 {
		p.rpsTable = table(encode.Lit("_rps"), encode.Lit("gpc0_rate(1s)"), encode.Lit("10s"))
	}
	if p.rpm > 0 {
		p.rpmTable = table(encode.Lit("_rpm"), encode.Lit("gpc0_rate(60s)"), encode.Lit("2m"))
	}
	if p.conns > 0 {
		p.connsTable = table(encode.Lit("_conn"), encode.Lit("conn_cur"), encode.Lit("10m"))
	}
	if p.rps == 0 && p.rpm == 0 && p.conns == 0 {
		return nil, nil
	}
	return p, nil
}

// writeRateLimit tracks the client address in each table of the profile
// (sc0 per second, sc1 per minute, sc2 connections: HAProxy 2.6 has
// three stick counters, and one request has one profile), refuses with
// 503 (ingress-nginx's limit-req-status-code default) when a count is at
// its limit, and counts the request once it passed every limit.
func writeRateLimit(c *encode.Config, name encode.Word, p *limitProfile) {
	type counter struct {
		limit      int
		table      encode.Word
		track, inc encode.Word // inc is zero for connections
		test, op   encode.Word
	}
	counters := []counter{
		{p.rps, p.rpsTable, encode.Lit("track-sc0"), encode.Lit("sc-inc-gpc0(0)"), encode.Lit("sc0_gpc0_rate"), encode.Lit("ge")},
		{p.rpm, p.rpmTable, encode.Lit("track-sc1"), encode.Lit("sc-inc-gpc0(1)"), encode.Lit("sc1_gpc0_rate"), encode.Lit("ge")},
		// conn_cur includes the request itself.
		{p.conns, p.connsTable, encode.Lit("track-sc2"), encode.Word{}, encode.Lit("sc2_conn_cur"), encode.Lit("gt")},
	}
	for _, k := range counters {
		if k.limit == 0 {
			continue
		}
		c.Line(httpRequest, k.track, encode.Lit("src"), encode.Lit("table"), k.table, ifWord, name)
		c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(503), ifWord, name,
			openBrace, encode.Concat(k.test, encode.Lit("("), k.table, encode.Lit(")")), k.op, encode.Num(k.limit), closeBrace)
	}
	for _, k := range counters {
		if k.limit > 0 && k.inc.Err() == nil {
			c.Line(httpRequest, k.inc, ifWord, name)
		}
	}
}

// writeStickTables renders each table, sorted by name.
func writeStickTables(c *encode.Config, u *sections) {
	tables := make([]stickTable, 0, len(u.tables))
	for _, t := range u.tables {
		tables = append(tables, t)
	}
	slices.SortFunc(tables, func(a, b stickTable) int { return cmp.Compare(a.name.String(), b.name.String()) })
	for _, t := range tables {
		c.Blank()
		c.Section(encode.Lit("backend"), t.name)
		c.Line(encode.Lit("stick-table"), encode.Lit("type"), encode.Lit("ipv6"), encode.Lit("size"), encode.Lit("100k"),
			encode.Lit("expire"), t.expire, encode.Lit("store"), t.store)
	}
}
