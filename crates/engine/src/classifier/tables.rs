//! ipfw lookup tables: `table N add 10.0.0.0/8 5`, matched by `table(N)`
//! in rule bodies, whose value `tablearg` hands to the action.
//!
//! Rules refer to a table by its slot, resolved when the rule is added, so
//! a lookup costs no name comparison. A table referred to by a rule, or
//! added to, exists from then on, as ipfw creates numbered tables on first
//! use; its type comes from that first use. Address lookups are longest
//! prefix first: one hash map per prefix length present, longest first.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use crate::command::{AddrMatch, TableKey, TableName, TableType};

/// Where a table lives among [`Tables`]' slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot(pub usize);

#[derive(Debug, Default, Clone)]
pub(crate) struct Tables {
    slots: Vec<Table>,
    by_name: HashMap<TableName, usize>,
}

#[derive(Debug, Clone)]
pub(crate) struct Table {
    pub name: TableName,
    pub ty: TableType,
    /// Per family (v4, v6): prefix length → network → value.
    nets: [BTreeMap<u8, HashMap<u128, u32>>; 2],
    names: HashMap<String, u32>,
    numbers: BTreeMap<u32, u32>,
    /// Destroyed: no longer listed.
    destroyed: bool,
}

impl Table {
    pub(crate) fn new(name: TableName, ty: TableType) -> Self {
        Table {
            name,
            ty,
            nets: Default::default(),
            names: HashMap::new(),
            numbers: BTreeMap::new(),
            destroyed: false,
        }
    }

    pub fn len(&self) -> usize {
        self.nets
            .iter()
            .flat_map(|f| f.values())
            .map(HashMap::len)
            .sum::<usize>()
            + self.names.len()
            + self.numbers.len()
    }

    /// Bytes its entries take: each entry's own size and a name's text
    /// (the maps' own nodes and slack not included).
    pub fn bytes(&self) -> usize {
        use std::mem::size_of;
        let nets: usize = self
            .nets
            .iter()
            .flat_map(|f| f.values())
            .map(HashMap::len)
            .sum();
        nets * (size_of::<(u128, u32)>() + 1)
            + self
                .names
                .keys()
                .map(|k| size_of::<(String, u32)>() + 1 + k.len())
                .sum::<usize>()
            + self.numbers.len() * size_of::<(u32, u32)>()
    }

    fn clear(&mut self) {
        self.nets = Default::default();
        self.names.clear();
        self.numbers.clear();
    }

    /// The value of the longest prefix holding `addr`.
    #[inline]
    pub fn lookup_addr(&self, v6: bool, addr: u128) -> Option<u32> {
        let bits = if v6 { 128 } else { 32 };
        self.nets[usize::from(v6)]
            .iter()
            .rev()
            .find_map(|(&len, nets)| nets.get(&(addr & mask(bits, len))).copied())
    }

    /// As [`Self::lookup_addr`], among prefixes longer than `len` only
    /// (`versrcreach` ignores the default route).
    pub fn lookup_addr_longer_than(&self, v6: bool, addr: u128, len: u8) -> Option<u32> {
        let bits = if v6 { 128 } else { 32 };
        self.nets[usize::from(v6)]
            .range(len.saturating_add(1)..)
            .rev()
            .find_map(|(&l, nets)| nets.get(&(addr & mask(bits, l))).copied())
    }

    pub fn lookup_number(&self, n: u32) -> Option<u32> {
        self.numbers.get(&n).copied()
    }

    pub fn lookup_name(&self, name: &str) -> Option<u32> {
        self.names.get(name).copied()
    }

    /// Entries in order: addresses (v4 then v6, by prefix), names, numbers.
    pub fn entries(&self) -> Vec<(TableKey, u32)> {
        let mut out = Vec::with_capacity(self.len());
        for (fam, by_len) in self.nets.iter().enumerate() {
            for (&prefix, nets) in by_len {
                for (&a, &v) in nets {
                    let addr = if fam == 1 {
                        IpAddr::V6(a.into())
                    } else {
                        IpAddr::V4((a as u32).into())
                    };
                    out.push((TableKey::Addr(AddrMatch { addr, prefix }), v));
                }
            }
        }
        out.extend(
            self.names
                .iter()
                .map(|(n, &v)| (TableKey::Iface(n.clone()), v)),
        );
        out.extend(self.numbers.iter().map(|(&n, &v)| (TableKey::Number(n), v)));
        out.sort();
        out
    }

    pub(crate) fn insert(&mut self, key: &TableKey, value: u32) {
        match key {
            TableKey::Addr(m) => {
                let (fam, bits, a) = split(m.addr);
                self.nets[fam]
                    .entry(m.prefix)
                    .or_default()
                    .insert(a & mask(bits, m.prefix), value);
            }
            TableKey::Iface(n) => {
                self.names.insert(n.clone(), value);
            }
            TableKey::Number(n) => {
                self.numbers.insert(*n, value);
            }
        }
    }

    fn remove(&mut self, key: &TableKey) -> bool {
        match key {
            TableKey::Addr(m) => {
                let (fam, bits, a) = split(m.addr);
                let by_len = &mut self.nets[fam];
                let Some(nets) = by_len.get_mut(&m.prefix) else {
                    return false;
                };
                let found = nets.remove(&(a & mask(bits, m.prefix))).is_some();
                if nets.is_empty() {
                    by_len.remove(&m.prefix);
                }
                found
            }
            TableKey::Iface(n) => self.names.remove(n).is_some(),
            TableKey::Number(n) => self.numbers.remove(n).is_some(),
        }
    }
}

fn split(a: IpAddr) -> (usize, u32, u128) {
    match a {
        IpAddr::V4(a) => (0, 32, u128::from(u32::from(a))),
        IpAddr::V6(a) => (1, 128, u128::from(a)),
    }
}

#[inline]
fn mask(bits: u32, prefix: u8) -> u128 {
    let prefix = u32::from(prefix).min(bits);
    if prefix == 0 {
        0
    } else {
        (u128::MAX >> (128 - bits)) & !((1u128 << (bits - prefix)) - 1)
    }
}

/// A table command the tables refused: a table's keys and what they are
/// used as do not agree, or the table or an entry is not there (or is).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// `table N create` of a table that exists.
    #[error("table {0} already exists")]
    Exists(TableName),
    /// A table that does not exist.
    #[error("table {0} does not exist")]
    NoTable(TableName),
    /// `table N delete KEY` of a key the table does not hold.
    #[error("table {name} has no entry {}", key_text(key))]
    NoEntry { name: TableName, key: TableKey },
    /// The table holds keys of type `holds`, and is used for `wanted`.
    #[error("table {name} holds {} keys, not {}", holds.as_str(), wanted.as_str())]
    Type {
        name: TableName,
        holds: TableType,
        wanted: TableType,
    },
    /// `key` is not of the table's type (`None`: a table with no type yet).
    #[error(
        "table {name} holds {} keys; `{}` is {}",
        holds.map_or("no", TableType::as_str),
        key_text(key),
        key.table_type().as_str()
    )]
    Key {
        name: TableName,
        holds: Option<TableType>,
        key: TableKey,
    },
}

impl Tables {
    /// Bytes the tables' entries take ([`Table::bytes`]), destroyed ones too.
    pub fn bytes(&self) -> usize {
        self.slots
            .iter()
            .map(|t| std::mem::size_of::<Table>() + t.bytes())
            .sum()
    }

    pub fn get(&self, s: Slot) -> &Table {
        &self.slots[s.0]
    }

    pub fn find(&self, name: &TableName) -> Option<&Table> {
        self.by_name.get(name).map(|&i| &self.slots[i])
    }

    /// The tables that exist, by name.
    pub fn all(&self) -> impl Iterator<Item = &Table> {
        let mut t: Vec<&Table> = self.slots.iter().filter(|t| !t.destroyed).collect();
        t.sort_by(|a, b| a.name.cmp(&b.name));
        t.into_iter()
    }

    /// The table `name`, made with type `ty` if it does not exist; an error
    /// if it exists with another type.
    pub fn resolve(&mut self, name: &TableName, ty: TableType) -> Result<Slot, TableError> {
        if let Some(&i) = self.by_name.get(name) {
            let t = &self.slots[i];
            if t.ty != ty {
                return Err(TableError::Type {
                    name: name.clone(),
                    holds: t.ty,
                    wanted: ty,
                });
            }
            return Ok(Slot(i));
        }
        self.slots.push(Table::new(name.clone(), ty));
        self.by_name.insert(name.clone(), self.slots.len() - 1);
        Ok(Slot(self.slots.len() - 1))
    }

    /// Checks `entries` for `name` without changing anything: the first
    /// entry decides the type of a table that does not exist yet.
    pub fn check_add(
        &self,
        name: &TableName,
        entries: &[(TableKey, u32)],
    ) -> Result<(), TableError> {
        let ty = self
            .find(name)
            .map(|t| t.ty)
            .or_else(|| entries.first().map(|(k, _)| k.table_type()));
        match entries.iter().find(|(k, _)| Some(k.table_type()) != ty) {
            Some((k, _)) => Err(TableError::Key {
                name: name.clone(),
                holds: ty,
                key: k.clone(),
            }),
            None => Ok(()),
        }
    }

    pub fn add(&mut self, name: &TableName, entries: &[(TableKey, u32)]) -> Result<(), TableError> {
        self.check_add(name, entries)?;
        let Some((first, _)) = entries.first() else {
            return Ok(());
        };
        let Slot(i) = self.resolve(name, first.table_type())?;
        for (k, v) in entries {
            self.slots[i].insert(k, *v);
        }
        Ok(())
    }

    pub fn create(&mut self, name: &TableName, ty: TableType) -> Result<(), TableError> {
        if self.by_name.contains_key(name) {
            return Err(TableError::Exists(name.clone()));
        }
        self.resolve(name, ty).map(|_| ())
    }

    /// Entries not in the table are an error, and nothing is removed.
    pub fn delete(&mut self, name: &TableName, keys: &[TableKey]) -> Result<(), TableError> {
        let &i = self
            .by_name
            .get(name)
            .ok_or_else(|| TableError::NoTable(name.clone()))?;
        let t = &mut self.slots[i];
        if let Some(k) = keys.iter().find(|k| !has(t, k)) {
            return Err(TableError::NoEntry {
                name: name.clone(),
                key: k.clone(),
            });
        }
        for k in keys {
            t.remove(k);
        }
        Ok(())
    }

    pub fn flush(&mut self, name: &TableName) -> Result<(), TableError> {
        let &i = self
            .by_name
            .get(name)
            .ok_or_else(|| TableError::NoTable(name.clone()))?;
        self.slots[i].clear();
        Ok(())
    }

    pub fn exists(&self, name: &TableName) -> bool {
        self.by_name.contains_key(name)
    }

    pub fn slot(&self, name: &TableName) -> Option<Slot> {
        self.by_name.get(name).map(|&i| Slot(i))
    }

    /// Forgets `name`: its slot stays, empty and unnamed, since slots are
    /// never reused while rules may hold them.
    pub fn destroy(&mut self, name: &TableName) -> Result<(), TableError> {
        let i = self
            .by_name
            .remove(name)
            .ok_or_else(|| TableError::NoTable(name.clone()))?;
        self.slots[i].clear();
        self.slots[i].destroyed = true;
        Ok(())
    }
}

fn has(t: &Table, k: &TableKey) -> bool {
    match k {
        TableKey::Addr(m) => {
            let (fam, bits, a) = split(m.addr);
            t.nets[fam]
                .get(&m.prefix)
                .is_some_and(|n| n.contains_key(&(a & mask(bits, m.prefix))))
        }
        TableKey::Iface(n) => t.names.contains_key(n),
        TableKey::Number(n) => t.numbers.contains_key(n),
    }
}

/// A key as `table N list` prints it.
pub fn key_text(k: &TableKey) -> String {
    match k {
        TableKey::Addr(m) => format!("{}/{}", m.addr, m.prefix),
        TableKey::Iface(n) => n.clone(),
        TableKey::Number(n) => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str, prefix: u8) -> TableKey {
        TableKey::Addr(AddrMatch {
            addr: s.parse().unwrap(),
            prefix,
        })
    }

    #[test]
    fn longest_prefix_wins_and_families_stay_apart() {
        let mut t = Tables::default();
        let n = TableName::Number(1);
        t.add(
            &n,
            &[
                (addr("10.0.0.0", 8), 1),
                (addr("10.1.0.0", 16), 2),
                (addr("10.1.2.3", 32), 3),
                (addr("::", 0), 6),
            ],
        )
        .unwrap();
        let tab = t.find(&n).unwrap();
        let v4 = |s: &str| u128::from(u32::from(s.parse::<std::net::Ipv4Addr>().unwrap()));
        assert_eq!(tab.lookup_addr(false, v4("10.9.9.9")), Some(1));
        assert_eq!(tab.lookup_addr(false, v4("10.1.9.9")), Some(2));
        assert_eq!(tab.lookup_addr(false, v4("10.1.2.3")), Some(3));
        assert_eq!(tab.lookup_addr(false, v4("11.0.0.1")), None);
        assert_eq!(tab.lookup_addr(true, 1), Some(6));
        assert_eq!(tab.len(), 4);
        // A name does not go into an address table; nothing changes.
        assert!(t
            .add(
                &n,
                &[
                    (addr("192.0.2.0", 24), 9),
                    (TableKey::Iface("em0".into()), 1)
                ]
            )
            .is_err());
        assert_eq!(t.find(&n).unwrap().len(), 4);
        assert!(t
            .delete(&n, &[addr("10.1.0.0", 16), addr("10.7.0.0", 16)])
            .is_err());
        t.delete(&n, &[addr("10.1.0.0", 16)]).unwrap();
        assert_eq!(
            t.find(&n).unwrap().lookup_addr(false, v4("10.1.9.9")),
            Some(1)
        );
    }

    /// The refusals carry the table, the types and the key, and say them
    /// in the words the user has always read.
    #[test]
    fn a_key_of_another_type_is_refused_with_what_the_table_holds() {
        let mut t = Tables::default();
        let n = TableName::Number(7);
        t.add(&n, &[(addr("10.0.0.0", 8), 1)]).unwrap();
        let em0 = TableKey::Iface("em0".into());
        let e = t.add(&n, &[(em0.clone(), 1)]).unwrap_err();
        assert_eq!(
            e,
            TableError::Key {
                name: n.clone(),
                holds: Some(TableType::Addr),
                key: em0,
            }
        );
        assert_eq!(e.to_string(), "table 7 holds addr keys; `em0` is iface");
        let e = t.resolve(&n, TableType::Iface).unwrap_err();
        assert_eq!(e.to_string(), "table 7 holds addr keys, not iface");
    }
}
