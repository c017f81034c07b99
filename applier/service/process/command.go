//go:build linux

package process

import (
	"errors"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/tend-dev/tend/applier/service"
)

// instanceEnv is the environment of in: exactly in.Env, plus PATH
// (service.DefaultPath) when in.Env sets none, plus $TEND_INVOCATION_ID when
// in has an invocation. Sorted, so it reads the same every time.
func instanceEnv(in Instance) []string {
	env := make([]string, 0, len(in.Env)+2)
	for k, v := range in.Env {
		if k != service.InvocationEnv {
			env = append(env, k+"="+v)
		}
	}
	if _, ok := in.Env["PATH"]; !ok {
		env = append(env, "PATH="+service.DefaultPath)
	}
	if in.Invocation != "" {
		env = append(env, service.InvocationEnv+"="+in.Invocation)
	}
	slices.Sort(env)
	return env
}

// instancePath is the PATH in runs with.
func instancePath(in Instance) string {
	if p, ok := in.Env["PATH"]; ok {
		return p
	}
	return service.DefaultPath
}

// lookCommand resolves name as exec.LookPath would, but against path (the
// instance's PATH, not tend's) and, for a relative name with a slash, dir.
func lookCommand(name, path, dir string) (string, error) {
	if name == "" {
		return "", service.Invalidf("command is empty: set services[].command")
	}
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		switch err := checkExecutable(p); {
		case errors.Is(err, fs.ErrNotExist):
			return "", service.Invalidf("command %q not found: no such file on this node; install it or fix services[].command", name)
		case err != nil:
			return "", service.Invalidf("command %q: %w; fix its mode or services[].command", name, err)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) {
			continue // "" and relative entries mean the working directory: not looked in, as exec.LookPath refuses them too
		}
		p := filepath.Join(d, name)
		if checkExecutable(p) == nil {
			return p, nil
		}
	}
	return "", service.Invalidf("command %q not found in PATH %q: install it, give an absolute path in services[].command or set PATH in services[].env", name, path)
}

// checkExecutable: p is a regular file with an execute bit.
func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	if fi.Mode()&0o111 == 0 {
		return errors.New("is not executable (mode " + fi.Mode().Perm().String() + ")")
	}
	return nil
}

// credential is who an instance runs as: nil when it runs as tend itself.
// Only root may switch to another user or group.
func credential(in Instance) (*syscall.Credential, error) {
	if in.User == "" && in.Group == "" {
		return nil, nil
	}
	euid, egid := os.Geteuid(), os.Getegid()
	uid, gid := euid, egid
	var groups []uint32
	if in.User != "" {
		u, err := lookupUser(in.User)
		if err != nil {
			return nil, err
		}
		uid, gid, groups = u.uid, u.gid, u.groups
	}
	if in.Group != "" {
		g, err := lookupGroup(in.Group)
		if err != nil {
			return nil, err
		}
		gid = g
	}
	if euid != 0 {
		if uid == euid && gid == egid {
			return nil, nil // already who it should run as
		}
		who := "user " + strconv.Quote(in.User)
		if in.User == "" {
			who = "group " + strconv.Quote(in.Group)
		}
		return nil, service.Invalidf("services[] %s: switching users needs tend to run as root (it runs as uid %d)", who, euid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}, nil
}

type userIDs struct {
	uid, gid int
	groups   []uint32 // supplementary
}

// lookupUser resolves a user name or numeric uid. A numeric uid that the
// node does not know runs with gid = uid and no supplementary groups.
func lookupUser(name string) (userIDs, error) {
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if !errors.As(err, &unknown) {
			return userIDs{}, service.Invalidf("look up user %q: %w", name, err)
		}
		n, nerr := strconv.Atoi(name)
		if nerr != nil || n < 0 {
			return userIDs{}, service.Invalidf("user %q does not exist on this node: create it or fix services[].user", name)
		}
		if u, err = user.LookupId(name); err != nil {
			return userIDs{uid: n, gid: n}, nil
		}
	}
	ids := userIDs{}
	if ids.uid, err = strconv.Atoi(u.Uid); err != nil {
		return userIDs{}, service.Invalidf("user %q: uid %q is not numeric", name, u.Uid)
	}
	if ids.gid, err = strconv.Atoi(u.Gid); err != nil {
		return userIDs{}, service.Invalidf("user %q: gid %q is not numeric", name, u.Gid)
	}
	gids, err := u.GroupIds()
	if err != nil {
		return userIDs{}, service.Invalidf("groups of user %q: %w", name, err)
	}
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			ids.groups = append(ids.groups, uint32(n))
		}
	}
	return ids, nil
}

// lookupGroup resolves a group name or numeric gid; a numeric gid needs no
// entry in /etc/group.
func lookupGroup(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		var unknown user.UnknownGroupError
		if !errors.As(err, &unknown) {
			return 0, service.Invalidf("look up group %q: %w", name, err)
		}
		if n, nerr := strconv.Atoi(name); nerr == nil && n >= 0 {
			return n, nil
		}
		return 0, service.Invalidf("group %q does not exist on this node: create it or fix services[].group", name)
	}
	n, err := strconv.Atoi(g.Gid)
	if err != nil {
		return 0, service.Invalidf("group %q: gid %q is not numeric", name, g.Gid)
	}
	return n, nil
}

// checkWorkingDir: dir exists and is a folder.
func checkWorkingDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return service.Invalidf("working directory %q does not exist on this node: create it or fix services[].workingDir", dir)
	case err != nil:
		return service.Invalidf("working directory %q: %w", dir, err)
	case !fi.IsDir():
		return service.Invalidf("working directory %q is not a directory: fix services[].workingDir", dir)
	}
	return nil
}
