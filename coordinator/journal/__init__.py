"""The coordinator's durable state: an SQLite journal (`database`), its group committer (`committer`), the
protocol every persisted component follows (`component`) and the unit of work that commits what an operation
touched (`unit`)."""
