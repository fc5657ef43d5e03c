//! Dummynet objects. (In progress.)
