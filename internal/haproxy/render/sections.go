package render

import (
	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/htpasswd"
)

// sections are what the profiles of a load balancer need beside its
// frontends and backends: the distinct userlists, by id (two Ingresses
// naming the same Secret share one), and the stick tables of the rate
// limits (ratelimit.go).
type sections struct {
	uuid   string
	lookup UserLookup
	byID   map[string][]htpasswd.User
	tables map[string]stickTable
	// authPools are the pools auth-url profiles ask (extauth.go).
	authPools map[string]bool
	// errorPools are the pools custom-http-errors profiles fetch their
	// pages from (customerrors.go).
	errorPools map[string]bool
	// apr1Maps are the map files of the userlists with $apr1$ users, by
	// list id (authMapFiles).
	apr1Maps map[string]encode.Word
}

func newSections(uuid string, lookup UserLookup) *sections {
	return &sections{uuid: uuid, lookup: lookup, byID: map[string][]htpasswd.User{}, tables: map[string]stickTable{},
		authPools: map[string]bool{}, errorPools: map[string]bool{}, apr1Maps: map[string]encode.Word{}}
}
