// The restricted torch.save unpickler (see torch_pickle.h): a stack machine over the opcodes
// pickle protocols 2-4 use for plain data, with an allow-list of globals.
#include "models/torch_pickle.h"

#include <fmt/format.h>

#include <cstring>
#include <map>

#include "common/error.h"

namespace chexscale::models::torch_pickle {
namespace {

[[noreturn]] void malformed(const std::string& what) {
  throw DataError("malformed pickle: " + what);
}

ValuePtr make(Value::Kind kind) {
  auto v = std::make_shared<Value>();
  v->kind = kind;
  return v;
}

ValuePtr make_int(int64_t i, Value::Kind kind = Value::Kind::kInt) {
  ValuePtr v = make(kind);
  v->integer = i;
  return v;
}

ValuePtr make_string(std::string text, Value::Kind kind = Value::Kind::kString) {
  ValuePtr v = make(kind);
  v->text = std::move(text);
  return v;
}

// torch.<Name>Storage -> dtype, the storage types torch.save names in persistent ids.
const std::map<std::string, torch::ScalarType>& storage_types() {
  static const std::map<std::string, torch::ScalarType> types = {
      {"torch.FloatStorage", torch::kFloat32}, {"torch.DoubleStorage", torch::kFloat64},
      {"torch.HalfStorage", torch::kFloat16},  {"torch.BFloat16Storage", torch::kBFloat16},
      {"torch.LongStorage", torch::kInt64},    {"torch.IntStorage", torch::kInt32},
      {"torch.ShortStorage", torch::kInt16},   {"torch.CharStorage", torch::kInt8},
      {"torch.ByteStorage", torch::kUInt8},    {"torch.BoolStorage", torch::kBool},
  };
  return types;
}

const char* const kOrderedDict = "collections.OrderedDict";
const char* const kRebuildTensor = "torch._utils._rebuild_tensor";
const char* const kRebuildTensorV2 = "torch._utils._rebuild_tensor_v2";
const char* const kRebuildParameter = "torch._utils._rebuild_parameter";
// torch::pickle_save's type annotation of a dict or list (obj, "Dict[str, Tensor]") -> obj.
const char* const kRestoreTypeTag = "torch.jit._pickle.restore_type_tag";

bool allowed_global(const std::string& name) {
  return name == kOrderedDict || name == kRebuildTensor || name == kRebuildTensorV2 ||
         name == kRebuildParameter || name == kRestoreTypeTag || storage_types().count(name) != 0;
}

int64_t as_int(const ValuePtr& v, const char* what) {
  if (v->kind != Value::Kind::kInt)
    malformed(fmt::format("{} is a {}, not an int", what, type_name(*v)));
  return v->integer;
}

std::vector<int64_t> as_ints(const ValuePtr& v, const char* what) {
  if (v->kind != Value::Kind::kTuple && v->kind != Value::Kind::kList) {
    malformed(fmt::format("{} is a {}, not a tuple", what, type_name(*v)));
  }
  std::vector<int64_t> out;
  for (const auto& item : v->items)
    out.push_back(as_int(item, what));
  return out;
}

class Parser {
 public:
  Parser(const uint8_t* data, std::size_t size, std::size_t& pos)
      : data_(data), size_(size), pos_(pos) {}

  ValuePtr run() {
    for (;;) {
      const uint8_t op = byte();
      if (op == '.') return pop();
      step(op);
    }
  }

 private:
  const uint8_t* take(std::size_t n) {
    if (n > size_ - pos_) malformed("truncated");
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  uint8_t byte() { return *take(1); }
  uint64_t little(std::size_t n) {
    const uint8_t* p = take(n);
    uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i)
      v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
  }
  std::string bytes(std::size_t n) {
    const uint8_t* p = take(n);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  std::string line() {
    const void* end = std::memchr(data_ + pos_, '\n', size_ - pos_);
    if (end == nullptr) malformed("unterminated GLOBAL");
    const std::size_t n = static_cast<const uint8_t*>(end) - (data_ + pos_);
    std::string s = bytes(n);
    ++pos_;
    return s;
  }

  ValuePtr pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back())) {
      malformed("stack underflow");
    }
    ValuePtr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  ValuePtr& top() {
    if (stack_.empty()) malformed("stack underflow");
    return stack_.back();
  }
  std::vector<ValuePtr> pop_to_mark() {
    if (marks_.empty()) malformed("no MARK");
    std::vector<ValuePtr> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()),
                                stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  ValuePtr tuple(std::vector<ValuePtr> items) {
    ValuePtr t = make(Value::Kind::kTuple);
    t->items = std::move(items);
    return t;
  }
  void put(std::size_t index) { memo_[index] = top(); }
  ValuePtr get(std::size_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) malformed(fmt::format("memo {} unset", index));
    return it->second;
  }

  Value& container(Value::Kind kind, const char* op) {
    Value& target = *top();
    if (target.kind != kind) malformed(fmt::format("{} on a {}", op, type_name(target)));
    return target;
  }
  void set_items(std::vector<ValuePtr> items) {
    if (items.size() % 2 != 0) malformed("odd SETITEMS");
    Value& dict = container(Value::Kind::kDict, "SETITEMS");
    for (std::size_t i = 0; i < items.size(); i += 2)
      dict.entries.emplace_back(items[i], items[i + 1]);
  }

  ValuePtr global(const std::string& module, const std::string& name) {
    const std::string dotted = module + "." + name;
    if (!allowed_global(dotted)) {
      throw DataError(fmt::format(
          "the file pickles {}, which a state dict does not hold (save model.state_dict(), not "
          "the model or other Python objects)",
          dotted));
    }
    return make_string(dotted, Value::Kind::kGlobal);
  }

  ValuePtr rebuild_tensor(const std::vector<ValuePtr>& args, const char* name) {
    if (args.size() < 4) malformed(fmt::format("{} with {} arguments", name, args.size()));
    if (args[0]->kind != Value::Kind::kStorage) {
      malformed(fmt::format("{} of a {}, not a storage", name, type_name(*args[0])));
    }
    ValuePtr t = make(Value::Kind::kTensor);
    t->tensor.storage = args[0]->storage;
    t->tensor.offset = as_int(args[1], "storage offset");
    t->tensor.sizes = as_ints(args[2], "tensor size");
    t->tensor.strides = as_ints(args[3], "tensor stride");
    if (t->tensor.sizes.size() != t->tensor.strides.size())
      malformed("size and stride differ in rank");
    return t;
  }

  ValuePtr call(const ValuePtr& callable, const ValuePtr& args) {
    if (callable->kind != Value::Kind::kGlobal || args->kind != Value::Kind::kTuple) {
      malformed(fmt::format("REDUCE of a {}", type_name(*callable)));
    }
    const std::string& name = callable->text;
    if (name == kOrderedDict) {
      if (!args->items.empty()) malformed("OrderedDict with arguments");
      return make(Value::Kind::kDict);
    }
    if (name == kRebuildTensor || name == kRebuildTensorV2) {
      return rebuild_tensor(args->items, name.c_str());
    }
    if (name == kRestoreTypeTag) {
      if (args->items.size() != 2) malformed("restore_type_tag without (object, type)");
      return args->items[0];
    }
    if (name == kRebuildParameter) {
      if (args->items.empty() || args->items[0]->kind != Value::Kind::kTensor) {
        malformed("_rebuild_parameter of something other than a tensor");
      }
      return args->items[0];
    }
    malformed(fmt::format("{} is not callable", name));
  }

  // ('storage', torch.<T>Storage, key, location, numel[, view_metadata]).
  ValuePtr persistent(const ValuePtr& pid) {
    if (pid->kind != Value::Kind::kTuple || pid->items.size() < 5 ||
        pid->items[0]->kind != Value::Kind::kString || pid->items[0]->text != "storage") {
      malformed("persistent id is not a storage");
    }
    const auto& f = pid->items;
    if (f[1]->kind != Value::Kind::kGlobal || storage_types().count(f[1]->text) == 0) {
      malformed(fmt::format("storage of type {}", type_name(*f[1])));
    }
    if (f[2]->kind != Value::Kind::kString) malformed("storage key is not a string");
    if (f.size() > 5 && f[5]->kind != Value::Kind::kNone) {
      throw DataError("storage views (files of PyTorch before 0.4) are not supported");
    }
    auto& storage = storages_[f[2]->text];
    if (!storage) {
      storage = std::make_shared<StorageRef>();
      storage->dtype = storage_types().at(f[1]->text);
      storage->key = f[2]->text;
      storage->numel = as_int(f[4], "storage size");
      if (storage->numel < 0) malformed("negative storage size");
    }
    ValuePtr v = make(Value::Kind::kStorage);
    v->storage = storage;
    return v;
  }

  // Protocol and frame headers, marks, tuples, lists and dicts; false for any other opcode.
  bool framing_or_container_op(uint8_t op) {
    switch (op) {
      case 0x80:  // PROTO
        if (byte() > 4) malformed("pickle protocol above 4");
        return true;
      case 0x95:  // FRAME
        take(8);
        return true;
      case '(':
        marks_.push_back(stack_.size());
        return true;
      case ')':
        stack_.push_back(tuple({}));
        return true;
      case 't':
        stack_.push_back(tuple(pop_to_mark()));
        return true;
      case 0x85:
      case 0x86:
      case 0x87: {
        std::vector<ValuePtr> items(op - 0x84);
        for (auto it = items.rbegin(); it != items.rend(); ++it)
          *it = pop();
        stack_.push_back(tuple(std::move(items)));
        return true;
      }
      case ']':
        stack_.push_back(make(Value::Kind::kList));
        return true;
      case 'a': {
        ValuePtr item = pop();
        container(Value::Kind::kList, "APPEND").items.push_back(item);
        return true;
      }
      case 'e': {
        std::vector<ValuePtr> items = pop_to_mark();
        Value& list = container(Value::Kind::kList, "APPENDS");
        list.items.insert(list.items.end(), items.begin(), items.end());
        return true;
      }
      case '}':
        stack_.push_back(make(Value::Kind::kDict));
        return true;
      case 's': {
        ValuePtr value = pop();
        ValuePtr key = pop();
        set_items({key, value});
        return true;
      }
      case 'u':
        set_items(pop_to_mark());
        return true;
      default:
        return false;
    }
  }

  // None, booleans, integers, floats and strings; false for any other opcode.
  bool scalar_op(uint8_t op) {
    switch (op) {
      case 'N':
        stack_.push_back(make(Value::Kind::kNone));
        return true;
      case 0x88:
      case 0x89:
        stack_.push_back(make_int(op == 0x88 ? 1 : 0, Value::Kind::kBool));
        return true;
      case 'J':
        stack_.push_back(make_int(static_cast<int32_t>(little(4))));
        return true;
      case 'K':
        stack_.push_back(make_int(static_cast<int64_t>(little(1))));
        return true;
      case 'M':
        stack_.push_back(make_int(static_cast<int64_t>(little(2))));
        return true;
      case 0x8a: {  // LONG1: n little-endian two's-complement bytes
        const std::size_t n = byte();
        if (n > 8) malformed("integer wider than 64 bits");
        uint64_t v = n == 0 ? 0 : little(n);
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) != 0) v |= ~uint64_t{0} << (8 * n);
        stack_.push_back(make_int(static_cast<int64_t>(v)));
        return true;
      }
      case 'G': {  // BINFLOAT, big-endian
        const uint8_t* p = take(8);
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i)
          bits = (bits << 8) | p[i];
        ValuePtr v = make(Value::Kind::kFloat);
        std::memcpy(&v->real, &bits, sizeof bits);
        stack_.push_back(v);
        return true;
      }
      case 'X':  // BINUNICODE
      case 'T':  // BINSTRING
      case 'B':  // BINBYTES
        stack_.push_back(make_string(bytes(little(4))));
        return true;
      case 0x8c:  // SHORT_BINUNICODE
      case 'U':   // SHORT_BINSTRING
      case 'C':   // SHORT_BINBYTES
        stack_.push_back(make_string(bytes(byte())));
        return true;
      default:
        return false;
    }
  }

  // Globals, the memo, calls (REDUCE, BUILD), persistent ids and POP; false for any other opcode.
  bool object_op(uint8_t op) {
    switch (op) {
      case 'c': {
        const std::string module = line();
        stack_.push_back(global(module, line()));
        return true;
      }
      case 0x93: {  // STACK_GLOBAL
        ValuePtr name = pop();
        ValuePtr module = pop();
        if (name->kind != Value::Kind::kString || module->kind != Value::Kind::kString) {
          malformed("STACK_GLOBAL of non-strings");
        }
        stack_.push_back(global(module->text, name->text));
        return true;
      }
      case 'q':
        put(byte());
        return true;
      case 'r':
        put(little(4));
        return true;
      case 0x94:  // MEMOIZE
        put(memo_.size());
        return true;
      case 'h':
        stack_.push_back(get(byte()));
        return true;
      case 'j':
        stack_.push_back(get(little(4)));
        return true;
      case 'R':
      case 0x81: {  // REDUCE, NEWOBJ
        ValuePtr args = pop();
        ValuePtr callable = pop();
        stack_.push_back(call(callable, args));
        return true;
      }
      case 'b': {  // BUILD: an OrderedDict's attributes (_metadata) or a tensor's; not kept
        pop();
        const Value::Kind kind = top()->kind;
        if (kind != Value::Kind::kDict && kind != Value::Kind::kTensor) {
          malformed(fmt::format("BUILD of a {}", type_name(*top())));
        }
        return true;
      }
      case 'Q':
        stack_.push_back(persistent(pop()));
        return true;
      case '0':
        pop();
        return true;

      default:
        return false;
    }
  }

  void step(uint8_t op) {
    if (framing_or_container_op(op) || scalar_op(op) || object_op(op)) return;
    malformed(fmt::format("unsupported opcode 0x{:02x} at byte {}", op, pos_ - 1));
  }

  const uint8_t* data_;
  std::size_t size_;
  std::size_t& pos_;
  std::vector<ValuePtr> stack_;
  std::vector<std::size_t> marks_;
  std::map<std::size_t, ValuePtr> memo_;
  std::map<std::string, std::shared_ptr<StorageRef>> storages_;
};

}  // namespace

std::string type_name(const Value& value) {
  switch (value.kind) {
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kTuple:
      return "tuple";
    case Value::Kind::kList:
      return "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kGlobal:
      return value.text;
    case Value::Kind::kStorage:
      return "storage";
    case Value::Kind::kTensor:
      break;
  }
  return "tensor";
}

ValuePtr parse(const uint8_t* data, std::size_t size, std::size_t& pos) {
  if (pos > size) malformed("starts past the end");
  return Parser(data, size, pos).run();
}

}  // namespace chexscale::models::torch_pickle
