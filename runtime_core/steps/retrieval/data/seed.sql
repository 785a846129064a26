-- Seed data for the embedded relational retrieval source (SQLite).
-- Idempotent: safe to apply on every start; rows are replaced, tables created if missing.
-- List columns (skills, required_skills) hold JSON arrays of lower-case skill names.

CREATE TABLE IF NOT EXISTS candidates (
    id               TEXT PRIMARY KEY,
    name             TEXT NOT NULL,
    title            TEXT NOT NULL,
    years_experience INTEGER NOT NULL,
    skills           TEXT NOT NULL,
    location         TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS jobs (
    id              TEXT PRIMARY KEY,
    title           TEXT NOT NULL,
    department      TEXT NOT NULL,
    min_years       INTEGER NOT NULL,
    required_skills TEXT NOT NULL,
    location        TEXT NOT NULL
);

INSERT OR REPLACE INTO candidates (id, name, title, years_experience, skills, location) VALUES
    ('c-1', 'Ada Lovelace', 'Senior Python Engineer', 8, '["python","redis","sql","distributed-systems"]', 'Remote'),
    ('c-2', 'Grace Hopper', 'Data Engineer', 5, '["python","sql","spark","airflow"]', 'Lisbon'),
    ('c-3', 'Alan Turing', 'Machine Learning Engineer', 3, '["python","pytorch","llm","statistics"]', 'London'),
    ('c-4', 'Katherine Johnson', 'Frontend Engineer', 2, '["typescript","react","css"]', 'Remote'),
    ('c-5', 'Edsger Dijkstra', 'Platform Engineer', 12, '["go","kubernetes","redis","postgres"]', 'Amsterdam');

INSERT OR REPLACE INTO jobs (id, title, department, min_years, required_skills, location) VALUES
    ('j-1', 'Backend Engineer (Python)', 'Platform', 5, '["python","redis","sql"]', 'Remote'),
    ('j-2', 'Machine Learning Engineer', 'AI', 3, '["python","llm","pytorch"]', 'London'),
    ('j-3', 'Site Reliability Engineer', 'Infrastructure', 6, '["kubernetes","go","postgres","terraform"]', 'Amsterdam');
