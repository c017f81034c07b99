package testgit

import (
	"crypto/subtle"
	"net/http"
	"strings"
	"sync"
)

// HTTPSOptions say which credentials a StartHTTPS server asks for; the zero
// value asks for none. When both a user and a token are set, either is
// accepted.
type HTTPSOptions struct {
	// User and Password, when User is set, are the basic-auth credentials
	// accepted.
	User, Password string
	// Token, when set, is accepted as the basic-auth password with any
	// non-empty user name, as GitHub and GitLab accept a personal access
	// token, or as "Authorization: Bearer TOKEN".
	Token string
}

// authCheck answers 401 to requests without the credentials opts ask for,
// as a Git host does, and passes the others on.
type authCheck struct {
	opts HTTPSOptions
	next http.Handler

	mu    sync.Mutex
	users []string
}

func (a *authCheck) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.opts.User == "" && a.opts.Token == "" {
		a.next.ServeHTTP(w, r)
		return
	}
	user, pass, basic := r.BasicAuth()
	bearer, isBearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	ok := (a.opts.User != "" && basic && equal(user, a.opts.User) && equal(pass, a.opts.Password)) ||
		(a.opts.Token != "" && basic && user != "" && equal(pass, a.opts.Token)) ||
		(a.opts.Token != "" && isBearer && equal(bearer, a.opts.Token))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="tend test"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	a.mu.Lock()
	a.users = append(a.users, user)
	a.mu.Unlock()
	a.next.ServeHTTP(w, r)
}

func (a *authCheck) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.users...)
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
