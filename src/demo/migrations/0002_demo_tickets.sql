-- Demo data for the default agent's built-in tools: acme support tickets, some of them overdue.
-- Due dates are relative to the day the migration runs, so a fresh install always has overdue tickets.

CREATE TABLE demo_ticket (
    id         text PRIMARY KEY,
    customer   text NOT NULL,
    title      text NOT NULL,
    status     text NOT NULL CHECK (status IN ('open', 'closed')),
    priority   text NOT NULL CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
    due_date   date NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE demo_ticket_comment (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ticket_id       text NOT NULL REFERENCES demo_ticket (id),
    body            text NOT NULL,
    -- The tool call's idempotency key: a re-executed tool step never comments twice.
    idempotency_key text NOT NULL UNIQUE,
    created_at      timestamptz NOT NULL DEFAULT now()
);

INSERT INTO demo_ticket (id, customer, title, status, priority, due_date) VALUES
    ('ACME-101', 'acme',    'Invoice PDF shows the wrong VAT rate',           'open',   'high',   current_date - 9),
    ('ACME-102', 'acme',    'SSO login loops back to the sign-in page',       'open',   'urgent', current_date - 3),
    ('ACME-103', 'acme',    'Export to CSV drops the last row',               'open',   'normal', current_date + 4),
    ('ACME-104', 'acme',    'Webhook retries are not backing off',            'open',   'normal', current_date - 1),
    ('ACME-105', 'acme',    'Add a dark theme to the dashboard',              'open',   'low',    current_date + 21),
    ('ACME-106', 'acme',    'Password reset e-mail goes to spam',             'closed', 'high',   current_date - 14),
    ('GLOBEX-201', 'globex', 'API rate limit too low for nightly sync',       'open',   'high',   current_date - 2),
    ('GLOBEX-202', 'globex', 'Typo on the pricing page',                      'open',   'low',    current_date + 7),
    ('INITECH-301', 'initech', 'TPS report template missing the cover sheet', 'open',   'normal', current_date - 5);
