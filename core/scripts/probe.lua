-- Answers 1 and touches nothing. Sent once before the first acquire of a
-- handle whose lock only a script can release, so that a server refusing
-- scripts is found out before a lock is taken, not at its release.
return 1
