package agent

// Quarantined says why models were kept off their newest version, which
// was rolled back on this node (see render.Desired.Quarantined), or is nil.
func (r *Result) Quarantined() error {
	if r.Desired == nil {
		return nil
	}
	return r.Desired.Quarantined
}

// ActiveUnverified says which models and images run a version that no
// longer carries the signatures verify asks for (see
// render.Desired.ActiveUnverified), or is nil.
func (r *Result) ActiveUnverified() error {
	if r.Desired == nil {
		return nil
	}
	return r.Desired.ActiveUnverified
}

// Unverified says which versions semver policies passed over because they
// are not signed as verify asks, and what each resolved to (see
// render.Desired.Unverified), or is nil.
func (r *Result) Unverified() error {
	if r.Desired == nil {
		return nil
	}
	return r.Desired.Unverified
}
