package installations

import (
	"context"
	"net/http"
	"time"

	"github.com/servicegate/servicegate/oauth"
)

// Config is what the installations of one app are made of: the book
// over its store, proved and renewed with the service's token endpoint,
// and the handler of its lifecycle calls.
type Config struct {
	// Store, Sealer and Lock: see BookConfig.
	Store  Store
	Sealer *Sealer
	Lock   func(ctx context.Context, organization string) (unlock func(), err error)
	// Service is the OAuth server's address; ClientID and ClientSecret
	// are the app's, with which it asks for app tokens.
	Service, ClientID, ClientSecret string
	// TokenTimeout bounds one request for an app token.
	TokenTimeout time.Duration
	// Renewed, Unreadable and Resealed: see BookConfig.
	Renewed    func(organization string, err error)
	Unreadable func(organization string, err error)
	Resealed   func(resealed, failed int)
	// Prove, Confirm, BaseURL, Paths, Forward, TokenHeader, Purge,
	// Budget, Source, Refuse and Report: see HandlerConfig.
	Prove       Prover
	Confirm     func(ctx context.Context, in *Installation, appToken string) (Confirmation, error)
	BaseURL     string
	Paths       [NumKinds]string
	Forward     bool
	TokenHeader string
	Purge       func(organizationID, domain string)
	Budget      *Budget
	Source      func(r *http.Request) string
	Refuse      func(w http.ResponseWriter, r *http.Request, status int, message string) error
	Report      func(o Outcome, organization string, err error)
}

// Open makes the book and the lifecycle handler of cfg.
func Open(cfg Config) (*Book, *Handler, error) {
	client := &oauth.Client{AuthURL: cfg.Service, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
		HTTP: &http.Client{Timeout: cfg.TokenTimeout}}
	book, err := NewBook(BookConfig{Store: cfg.Store, Sealer: cfg.Sealer, Lock: cfg.Lock, App: cfg.ClientID,
		Grant: ServiceGrant(client, nil), Renewed: cfg.Renewed, Unreadable: cfg.Unreadable, Resealed: cfg.Resealed})
	if err != nil {
		return nil, nil, err
	}
	handler, err := NewHandler(HandlerConfig{Book: book, ClientID: cfg.ClientID, Prove: cfg.Prove, Confirm: cfg.Confirm,
		BaseURL: cfg.BaseURL, Paths: cfg.Paths, Forward: cfg.Forward, TokenHeader: cfg.TokenHeader, Purge: cfg.Purge,
		Budget: cfg.Budget, Source: cfg.Source, Refuse: cfg.Refuse, Report: cfg.Report})
	if err != nil {
		return nil, nil, err
	}
	return book, handler, nil
}
