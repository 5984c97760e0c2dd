package installations

import (
	"encoding/json"
	"fmt"
	"time"
)

// Installation is one organization's installation of the app, as the
// service announced it and proved it.
type Installation struct {
	// OrganizationID is the organization's id, in decimal. It is the
	// record's key and its seal's additional data.
	OrganizationID string `json:"organizationId"`
	// Domain is the organization's domain; empty in the standard
	// edition.
	Domain string `json:"domain,omitempty"`
	// BaseURL is the address of the service for this organization.
	BaseURL string `json:"baseUrl,omitempty"`
	// AppID is the app's id at the service.
	AppID string `json:"appId"`
	// AppSecret is the secret the service gave for this installation:
	// it signs the organization's webhook deliveries and asks for app
	// tokens.
	AppSecret string `json:"appSecret"`
	// UserID is the user who installed the app; app tokens are asked for
	// in that user's name.
	UserID string `json:"userId,omitempty"`
	// InstalledAt is when the installation was stored.
	InstalledAt time.Time `json:"installedAt"`
	// Token is the latest app token and its lifetime.
	Token Token `json:"token"`
}

// Token is an app token the service issued for an organization.
type Token struct {
	// AccessToken is the bearer token.
	AccessToken string `json:"accessToken,omitempty"`
	// IssuedAt and Expires bound its lifetime.
	IssuedAt time.Time `json:"issuedAt"`
	Expires  time.Time `json:"expires"`
}

// String names the installation without its secrets, for a log line.
func (in *Installation) String() string {
	if in.Domain != "" {
		return fmt.Sprintf("organization %s (%s)", in.OrganizationID, in.Domain)
	}
	return "organization " + in.OrganizationID
}

// sealRecord encodes and seals a record for its organization.
func (s *Sealer) sealRecord(in *Installation) ([]byte, error) {
	plain, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encoding the installation of %s: %w", in, err)
	}
	return s.Seal(in.OrganizationID, plain), nil
}

// openRecord opens a record stored under organization, and says which key
// it is sealed under. A record that opens but names another organization
// is refused as well.
func (s *Sealer) openRecord(organization string, sealed []byte) (*Installation, KeyState, error) {
	plain, state, err := s.OpenState(organization, sealed)
	if err != nil {
		return nil, KeyNone, err
	}
	var in Installation
	if err := json.Unmarshal(plain, &in); err != nil || in.OrganizationID != organization {
		return nil, KeyNone, ErrSealed
	}
	return &in, state, nil
}
