// Package console is the web console served at GET / on the admin
// listener: plain HTML, CSS and JavaScript embedded in the binary (no
// build step, no framework, nothing fetched from the network).
//
// It owns only the static files and the handler that serves them. It
// holds no data and no logic of its own: the page reads the admin API
// (/v1/transactions a page at a time, a transaction with its timeline,
// /v1/markers, /v1/leaders, /v1/coordinators, /v1/topics with a page of
// partitions, /v1/topics/{name}/offsets with each partition's producers,
// /v1/topics/{name}/records, /v1/groups, /v1/faults, /metrics) from the
// browser, polling it every 2 s (one draw at a time), and its Abort and
// Retry buttons call the API's POST endpoints after the same
// show-and-confirm step as `txncoord txn abort`; the faults view adds and
// clears faults through /v1/faults.
//
// Authentication: the files themselves are served without the admin
// token (they hold no data), so the login form can load; with a token
// configured every API call the page makes carries it as
// "Authorization: Bearer", the token kept in the tab's sessionStorage,
// never in a URL. Without it the page shows only the login form.
//
// Views (hash routes): #/cluster, #/transactions, #/txn/{id}, #/markers,
// #/topics, #/topic/{name}, #/records/{topic}/{partition}, #/groups,
// #/group/{id}, #/plots, #/faults.
package console
