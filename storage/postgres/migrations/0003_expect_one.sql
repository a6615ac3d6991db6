-- kassa_expect_one fails the transaction when a write that must change
-- exactly one row did not. Writes sent in the same round trip as their
-- COMMIT (storage/postgres/wire.go) cannot have their row count looked at
-- before the commit, so they check it here: an error makes the server skip
-- the COMMIT, and the transaction rolls back.
CREATE FUNCTION kassa_expect_one(n bigint, what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF n <> 1 THEN
        RAISE EXCEPTION '%: % rows changed, 1 expected', what, n USING ERRCODE = 'KS001';
    END IF;
END $$;
